"""Over stdio the answers are written by the event loop: the SDK's own writer hands each answer's write and its
flush to a worker thread, two round trips between threads per answer that each wait for the GIL (and so for the
learning thread while it holds it). What handlers or children print meanwhile still misses the wire."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import LATEST_PROTOCOL_VERSION

from toolwise.config import AppConfig
from toolwise.server.transports import _stdout_on_loop, serve_stdio


async def answer(wire: int, seen: bytearray) -> dict[str, Any]:
    """The next JSON-RPC line the server wrote on `wire`."""
    while b"\n" not in seen:
        chunk = await asyncio.wait_for(asyncio.to_thread(os.read, wire, 1 << 16), timeout=30)
        assert chunk, "the server closed stdout before answering"
        seen += chunk
    line, _, rest = bytes(seen).partition(b"\n")
    seen[:] = rest
    message: dict[str, Any] = json.loads(line)
    return message


async def test_answers_over_stdio_are_written_by_the_event_loop_and_stray_output_misses_the_wire(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdin, to_stdin = os.pipe()  # (read end, write end)
    from_stdout, stdout = os.pipe()
    monkeypatch.setattr(sys, "stdin", os.fdopen(stdin, "r"))
    monkeypatch.setattr(sys, "stdout", os.fdopen(stdout, "w"))

    async def no_thread(*args: object, **kwargs: object) -> None:
        raise AssertionError("an answer was handed to a worker thread")

    monkeypatch.setattr(anyio.to_thread, "run_sync", no_thread)  # what the SDK's stdout writer goes through
    database = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    config = AppConfig.model_validate({"mcpServers": {}, "toolwise": {"database_url": database}})
    serving = asyncio.create_task(serve_stdio(config))
    seen = bytearray()

    def send(message: dict[str, Any]) -> None:
        os.write(to_stdin, json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")

    client = {"name": "t", "version": "1"}
    hello = {"protocolVersion": LATEST_PROTOCOL_VERSION, "capabilities": {}, "clientInfo": client}
    send({"id": 1, "method": "initialize", "params": hello})
    assert (await answer(from_stdout, seen))["result"]["serverInfo"]["name"] == "toolwise"
    send({"method": "notifications/initialized"})
    os.write(stdout, b"a stray print of a handler\n")  # fd of stdout, as a child or a print would write it
    send({"id": 2, "method": "tools/list"})
    listed = await answer(from_stdout, seen)
    assert listed["id"] == 2 and any(t["name"] == "recommend_tool" for t in listed["result"]["tools"])
    os.close(to_stdin)  # the client goes: serving ends, the ordinary shutdown runs
    await asyncio.wait_for(serving, timeout=60)
    os.write(stdout, b"after\n")  # stdout is the wire again once serving ended
    assert await asyncio.to_thread(os.read, from_stdout, 1 << 16) == b"after\n"
    os.close(from_stdout)


async def test_an_answer_larger_than_the_pipe_holds_arrives_whole_once_the_client_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from_stdout, stdout = os.pipe()
    monkeypatch.setattr(sys, "stdout", os.fdopen(stdout, "w"))
    big = "x" * (4 << 20) + "\n"  # far more than a pipe's buffer: the write waits for the reader (`flush`)
    received = asyncio.ensure_future(asyncio.to_thread(read_line, from_stdout))
    async with _stdout_on_loop() as out:
        assert out is not None
        await out.write(big)
        await asyncio.wait_for(out.flush(), timeout=30)
    assert await asyncio.wait_for(received, timeout=30) == big.encode()
    os.close(from_stdout)


def read_line(fd: int) -> bytes:
    seen = b""
    while not seen.endswith(b"\n"):
        chunk = os.read(fd, 1 << 16)
        assert chunk, "the pipe closed before the line ended"
        seen += chunk
    return seen
