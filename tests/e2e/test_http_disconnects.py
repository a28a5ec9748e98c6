"""A client that leaves before its request is whole (a timeout, a process killed while it posts) is an ordinary
event on a server: nothing to answer and nothing to log as an error. The SDK's transport reads such a body as an
exception (starlette's ClientDisconnect), which uvicorn or the SDK logged with its traceback at ERROR."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from mcp import Client

from tests.e2e.conftest import BIN, free_port, time_server
from tests.e2e.test_resilience import wait_for_port

NOW = ("time__get_current_time", {"timezone": "UTC"})


def _post_cut_short(port: int, headers: dict[str, str]) -> None:
    """A tools/call POST whose client sends its headers and a tenth of its body, then closes the socket."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": NOW[0], "arguments": NOW[1]}}
    ).encode()
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body[: len(body) // 10])


async def test_a_client_that_leaves_mid_request_leaves_no_error_in_the_log(write_config: Callable[..., Path]) -> None:
    modern = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": NOW[0]}
    port = free_port()
    config = write_config({"time": time_server()})
    proc = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--http", "--port", str(port), "--config", str(config)],
        stderr=subprocess.PIPE,
    )
    try:
        await wait_for_port(port)
        for headers in (modern, {}):  # the 2026-07-28 era's POST, a handshake era's (no session yet)
            _post_cut_short(port, headers)
            await asyncio.sleep(0.5)  # read by toolwise
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:  # toolwise still serves
            assert not (await client.call_tool(*NOW)).is_error
        proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.to_thread(proc.communicate, timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr.decode()[-3000:]
    errors = [line for line in stderr.decode().splitlines() if " ERROR " in line or "Traceback" in line]
    assert errors == [], errors  # before: 'Exception in ASGI application', 'Error handling POST request', each traced
