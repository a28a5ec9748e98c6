"""What an unlucky user does to a running toolwise: cancels calls, stops it with signals, points it
at a broken database. Every answered call stays recorded and every background task stays alive."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.e2e.conftest import BIN, free_port, rows, time_server, toolwise
from tests.e2e.test_operations import run_cli
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.instances import HEARTBEAT_S
from toolwise.feedback.records import InstanceStatus

CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


async def test_cancelled_own_tool_calls_leave_the_writer_recording(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config({"time": time_server()})
    answered = 0
    async with toolwise(config) as client:
        for i in range(30):
            assert not (await client.call_tool("time__convert_time", CONVERT)).is_error
            answered += 1
            # The client gives up (a timeout, a user's stop): the request is cancelled in the server.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.call_tool("get_tool_metrics", {}), 0.002 + (i % 10) * 0.002)
        metrics = await client.call_tool("get_tool_metrics", {})
        assert not metrics.is_error, metrics.content
        assert metrics.structured_content["metrics"][0]["calls"] == answered
    assert rows(tmp_path / "toolwise.db", "SELECT count(*) FROM executions") == [(answered,)]
    assert rows(tmp_path / "toolwise.db", "SELECT source FROM snapshots") == [("shutdown",)]


async def wait_for_port(port: int) -> None:
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any] | None:
    """Send one JSON-RPC message; for a request, read lines until its response arrives."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()
    while "id" in message:
        line = proc.stdout.readline()
        assert line, "toolwise closed stdout"
        reply: dict[str, Any] = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply
    return None


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_on_stdio_shuts_down_cleanly_while_stdin_stays_open(
    write_config: Callable[..., Path], tmp_path: Path, sig: signal.Signals
) -> None:
    config = write_config({"time": time_server()}, snapshot_interval_s=0)
    proc = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--config", str(config), "--log-level", "warning"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        assert "result" in (rpc(proc, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}) or {})
        rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        answered = 40
        for i in range(1, answered + 1):
            params = {"name": "time__convert_time", "arguments": CONVERT}
            reply = rpc(proc, {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params})
            assert reply is not None and not reply["result"].get("isError")
        proc.send_signal(sig)  # stdin stays open: the client did not go away
        _, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr.decode()[-2000:]
    db = tmp_path / "toolwise.db"
    assert rows(db, "SELECT count(*) FROM executions") == [(answered,)]
    assert rows(db, "SELECT source FROM snapshots") == [("shutdown",)]


@pytest.mark.parametrize(
    ("content", "needle"),
    [(b"this is not an sqlite file, just junk" * 100, "file is not a database"), (None, "unable to open")],
)
def test_an_unusable_database_gives_one_clear_message_and_exit_code_2(
    write_config: Callable[..., Path], tmp_path: Path, content: bytes | None, needle: str
) -> None:
    db = tmp_path / "toolwise.db"
    if content is None:
        db.mkdir()  # a folder where the database file should be
    else:
        db.write_bytes(content)
    config = write_config({"time": time_server()})
    proc = subprocess.run(
        [str(BIN / "toolwise"), "serve", "--config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert str(db) in proc.stderr and needle in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) <= 3
    assert proc.stdout == ""


async def test_inspect_status_calls_an_instance_without_heartbeat_stale(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config({"time": time_server()})
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    now = utcnow()
    async with FeedbackService(url) as feedback:
        for name, beat in (("aaaaaaaa", now), ("bbbbbbbb", now - timedelta(seconds=5 * HEARTBEAT_S))):
            status = {"serving": "linucb", "store": "ok"}
            await feedback.instances.heartbeat(InstanceStatus(name, "default", "h", 1, beat, beat, status))
    proc = run_cli("inspect", "status", "--config", str(config))
    assert proc.returncode == 0, proc.stderr
    alive = next(line for line in proc.stdout.splitlines() if "aaaaaaaa" in line)
    killed = next(line for line in proc.stdout.splitlines() if "bbbbbbbb" in line)
    assert "alive" in alive and "stale" not in alive
    assert "stale since" in killed and "alive" not in killed


async def test_sessions_of_closed_http_connections_are_freed(write_config: Callable[..., Path]) -> None:
    port = free_port()
    config = write_config({"time": time_server()})
    proc = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--http", "--port", str(port), "--config", str(config)],
        stderr=subprocess.DEVNULL,
    )
    try:
        await wait_for_port(port)
        for _ in range(30):
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                assert not (await client.call_tool("time__convert_time", CONVERT)).is_error
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            await client.call_tool("time__convert_time", CONVERT)
            stats = await client.call_tool("get_learning_stats", {})
        assert stats.structured_content["open_sessions"] == 1  # this connection's; 30 were closed
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)


def test_stdin_that_is_not_a_pipe_still_ends_serving(write_config: Callable[..., Path]) -> None:
    config = write_config({"time": time_server()})
    proc = subprocess.run(
        [str(BIN / "toolwise"), "serve", "--config", str(config), "--log-level", "warning"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]  # /dev/null: end of input at once
