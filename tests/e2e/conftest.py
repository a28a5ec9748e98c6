"""Real peers: toolwise started as Claude Desktop would (a subprocess on stdio, or HTTP), wrapping
the real mcp-server-time and mcp-server-git, driven through the SDK's own `mcp.Client`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

BIN = Path(sys.executable).parent


def time_server(marker: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}
    if marker:
        spec["env"] = {"TOOLWISE_TEST_MARKER": marker}
    return spec


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit and one uncommitted change."""
    path = tmp_path / "repo"
    path.mkdir()

    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)

    run("init", "-q", "-b", "main")
    run("config", "user.email", "t@example.com")
    run("config", "user.name", "Tester")
    (path / "README").write_text("hello\n")
    run("add", "README")
    run("commit", "-qm", "first")
    (path / "README").write_text("hello\nworld\n")
    return path


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[..., Path]:
    def write(servers: dict[str, Any] | None = None, **settings: Any) -> Path:
        path = tmp_path / f"config-{uuid.uuid4().hex[:6]}.json"
        toolwise = {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", "seed": 3, **settings}
        servers = servers if servers is not None else {"time": time_server(), "git": {"command": "mcp-server-git"}}
        path.write_text(json.dumps({"mcpServers": servers, "toolwise": toolwise}))
        return path

    return write


@asynccontextmanager
async def toolwise(config: Path, mode: str = "auto") -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=str(BIN / "toolwise"), args=["serve", "--config", str(config), "--log-level", "warning"]
    )
    async with Client(params, mode=mode, read_timeout_seconds=60) as client:
        yield client


@asynccontextmanager
async def direct(command: str, *args: str, mode: str = "auto") -> AsyncIterator[Client]:
    async with Client(StdioServerParameters(command=str(BIN / command), args=list(args)), mode=mode) as client:
        yield client


async def caught_up(client: Client) -> dict[str, Any]:
    """get_learning_stats once toolwise has learned the log after its snapshot (it replays in the
    background after start-up and says "catching up" meanwhile)."""
    for _ in range(6000):
        result = await client.call_tool("get_learning_stats", {})
        stats = dict(result.structured_content or {})
        if "catching up" not in stats.get("serving", ""):
            return stats
        await anyio.sleep(0.01)
    raise TimeoutError("toolwise did not catch up with the log in 60 s")


def rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql).fetchall()


def kill_marked(marker: str) -> int:
    """SIGKILL every process whose environment carries the marker; returns how many."""
    killed = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
        except OSError:
            continue
        if f"TOOLWISE_TEST_MARKER={marker}".encode() in environ:
            os.kill(int(proc.name), signal.SIGKILL)
            killed += 1
    return killed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@asynccontextmanager
async def toolwise_http(config: Path) -> AsyncIterator[str]:
    """`toolwise serve --http` in a subprocess; yields its /mcp URL and stops it with SIGINT."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--http", "--port", str(port), "--config", str(config)],
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(300):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.1):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr.decode()[-2000:]
