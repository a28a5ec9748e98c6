"""The HTTP transport has a lock: a bearer token on /mcp, /metrics and /dashboard, Host checks on every bind
address, and no non-loopback bind without a token."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from email.message import Message
from pathlib import Path

from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import BIN, free_port, time_server, toolwise
from toolwise import sdk

TOKEN = "s3cret-token-for-the-tests-only"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@contextmanager
def serving(config: Path, host: str, logs: list[str] | None = None, **env: str) -> Iterator[str]:
    """toolwise serving over HTTP; `logs` gets its stderr once it stopped."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--http", "--host", host, "--port", str(port), "-c", str(config)],
        stderr=subprocess.PIPE,
        env={**os.environ, **env},
    )
    try:
        for _ in range(300):
            try:
                with socket.create_connection((host, port), timeout=0.1):
                    break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()[-2000:]  # type: ignore[union-attr]
                time.sleep(0.1)
        yield f"http://{host}:{port}"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        if logs is not None:
            logs.append(err.decode())


def request(url: str, headers: dict[str, str], body: object = None) -> tuple[int, Message]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=10) as response:
            return response.status, response.headers
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers


async def test_the_dashboard_link_with_the_token_is_logged_without_it(write_config: Callable[..., Path]) -> None:
    """The access log (stderr, which Claude Desktop keeps in a file) printed `GET /dashboard?token=<the token>`."""
    logs: list[str] = []
    with serving(write_config({}), "127.0.0.1", logs, TOOLWISE_HTTP_TOKEN=TOKEN) as base:
        where = urllib.parse.urlsplit(base)
        connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=10)
        connection.request("GET", f"/dashboard?token={TOKEN}&window=1h")
        assert connection.getresponse().status == 303  # to the page without it, setting the cookie
        connection.close()
    assert TOKEN not in logs[0]
    assert "GET /dashboard?token=***&window=1h" in logs[0], logs[0][-2000:]


def test_a_key_in_an_http_downstreams_url_is_not_logged(write_config: Callable[..., Path]) -> None:
    """A hosted server's URL often carries its key (`…/mcp?api_key=…`): every request to it was logged at
    INFO, key and all (`httpx2: HTTP Request: POST http://…/mcp?api_key=<key>`), and so was every request
    toolwise's own HTTP transport answered (`uvicorn.access`)."""
    key = "sk-live-" + "k" * 24
    downstream_logs: list[str] = []
    front_logs: list[str] = []
    with serving(write_config({"time": time_server()}), "127.0.0.1", downstream_logs) as downstream:
        front = write_config({"up": {"url": f"{downstream}/mcp?api_key={key}&region=eu"}})
        with serving(front, "127.0.0.1", front_logs) as base:
            for _ in range(300):
                with urllib.request.urlopen(base + "/healthz", timeout=10) as answer:
                    health = json.loads(answer.read())
                if health["downstreams"]["ready"] == 1:
                    break
                time.sleep(0.1)
            assert health["downstreams"]["ready"] == 1, health
    assert key not in front_logs[0] and key not in downstream_logs[0]
    assert "POST /mcp?api_key=***&region=eu" in downstream_logs[0], downstream_logs[0][-2000:]


def test_a_debug_log_level_shows_an_http_downstreams_url_without_its_key(write_config: Callable[..., Path]) -> None:
    """`--log-level debug` (what a user turns on to see why a server does not connect) logged the SDK's
    `Connecting to StreamableHTTP endpoint: http://…/mcp?api_key=<key>` whole, each retry again."""
    key, password = "sk-live-" + "k" * 24, "hunter2-" + "p" * 12
    url = f"http://admin:{password}@127.0.0.1:{free_port()}/mcp?api_key={key}&region=eu"
    config = write_config({"up": {"url": url, "headers": {"Authorization": "Bearer " + key}}})
    done = subprocess.run(
        [str(BIN / "toolwise"), "serve", "-c", str(config), "--log-level", "debug"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Connecting to StreamableHTTP endpoint" in done.stderr, done.stderr[-2000:]
    assert key not in done.stderr and password not in done.stderr
    assert "/mcp?api_key=***&region=eu" in done.stderr, done.stderr[-2000:]


async def test_http_needs_the_right_bearer_token_on_mcp_metrics_and_dashboard(
    write_config: Callable[..., Path],
) -> None:
    with serving(write_config({}), "127.0.0.1", TOOLWISE_HTTP_TOKEN=TOKEN) as base:
        for path, body in (("/mcp", INITIALIZE), ("/metrics", None), ("/dashboard", None)):
            status, headers = await asyncio.to_thread(request, base + path, {}, body)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
            wrong = {"Authorization": "Bearer not-" + TOKEN}
            status, headers = await asyncio.to_thread(request, base + path, wrong, body)
            assert status == 401 and 'error="invalid_token"' in headers["WWW-Authenticate"]
        right = {"Authorization": f"Bearer {TOKEN}"}
        assert (await asyncio.to_thread(request, base + "/metrics", right))[0] == 200
        assert (await asyncio.to_thread(request, base + "/dashboard", right))[0] == 200
        transport = streamable_http_client(base + "/mcp", http_client=sdk.http_client(headers=right))
        async with Client(transport) as client:
            assert "recommend_tool" in {t.name for t in (await client.list_tools()).tools}


async def test_a_foreign_host_is_refused_on_any_loopback_address(write_config: Callable[..., Path]) -> None:
    with serving(write_config({}), "127.0.0.2") as base:
        port = base.rsplit(":", 1)[1]
        evil = {"Host": "evil.example"}
        assert (await asyncio.to_thread(request, base + "/mcp", evil, INITIALIZE))[0] == 421
        assert (await asyncio.to_thread(request, base + "/metrics", evil))[0] == 421
        assert (await asyncio.to_thread(request, base + "/dashboard", evil))[0] == 421
        origin = {"Origin": "http://evil.example"}
        assert (await asyncio.to_thread(request, base + "/mcp", origin, INITIALIZE))[0] == 403
        own = {"Host": f"127.0.0.2:{port}"}
        assert (await asyncio.to_thread(request, base + "/mcp", own, INITIALIZE))[0] == 200
        assert (await asyncio.to_thread(request, base + "/metrics", own))[0] == 200
        assert (await asyncio.to_thread(request, base + "/dashboard", own))[0] == 200


def test_a_non_loopback_bind_without_a_token_is_refused(write_config: Callable[..., Path]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TOOLWISE_HTTP_TOKEN"}
    proc = subprocess.run(
        [str(BIN / "toolwise"), "serve", "--http", "--host", "0.0.0.0", "-c", str(write_config({}))],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 2
    assert "without a token" in proc.stderr and "TOOLWISE_HTTP_TOKEN" in proc.stderr
    assert "Traceback" not in proc.stderr


async def test_an_http_downstream_gets_its_configured_headers(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    with serving(write_config({}), "127.0.0.1", TOOLWISE_HTTP_TOKEN=TOKEN) as base:
        locked = {"url": base + "/mcp", "headers": {"Authorization": f"Bearer {TOKEN}"}}
        config = write_config({"locked": locked}, database_url=f"sqlite+aiosqlite:///{tmp_path / 'front.db'}")
        async with toolwise(config) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("locked__get_learning_stats", {})
    assert "locked__recommend_tool" in names and not result.is_error
