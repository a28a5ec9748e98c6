"""Every decision tied to its call: a proxied call is learned with the decision it followed, whichever
session the decision named, as an agent framework drives toolwise (session_id on our tools, plain
downstream calls). In-process through the MCP surface (`Client(server)`), the real mcp-server-time
downstream, a real SQLite file read after shutdown."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from toolwise.server.app import Toolwise, build_server
from toolwise.server.config import AppConfig

NOW = "time__get_current_time"
CONVERT = "time__convert_time"
CONVERT_ARGS = {"source_timezone": "UTC", "time": "09:00", "target_timezone": "Asia/Tokyo"}


@asynccontextmanager
async def toolwise(db: Path) -> AsyncIterator[Client]:
    time_server = {"command": str(Path(sys.executable).parent / "mcp-server-time"), "args": ["--local-timezone", "UTC"]}
    config = AppConfig.model_validate(
        {
            "mcpServers": {"time": time_server},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{db}", "seed": 7, "snapshot_interval_s": 0},
        }
    )
    # The handshake era: an in-process 2026-07-28 request comes on no connection (server/clients.py),
    # so nothing ties a plain call to a decision made on another request.
    async with Toolwise(config) as app, Client(build_server(app), mode="legacy") as client:
        yield client


async def recommend(client: Client, query: str, tool: str, session_id: str) -> str:
    """A decision in `session_id` that recommends `tool` (candidates pin what is recommended)."""
    result = await client.call_tool(
        "recommend_tool", {"query": query, "session_id": session_id, "candidates": [tool], "top_k": 1}
    )
    assert not result.is_error, result.content
    return str(result.structured_content["decision_id"])


def executions(db: Path) -> dict[str, tuple[Any, ...]]:
    """Each call's (session, decision, query), by tool + position in call order."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT tool, session_id, decision_id, query FROM executions ORDER BY seq").fetchall()
    return {f"{tool}#{i}": (session, decision, query) for i, (tool, session, decision, query) in enumerate(rows)}


async def test_a_plain_call_follows_the_decision_that_named_a_session(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        decision = await recommend(client, "what time is it in Tokyo", NOW, "conversation-1")
        result = await client.call_tool(NOW, {"timezone": "Asia/Tokyo"})  # no session_id, no _meta
        assert not result.is_error
        ended = await client.call_tool("end_session", {"session_id": "conversation-1", "outcome": "success"})
        assert not ended.is_error, ended.content
        assert ended.structured_content["tools"] == [NOW]
    assert executions(db) == {f"{NOW}#0": ("conversation-1", decision, "what time is it in Tokyo")}


async def test_two_interleaved_conversations_on_one_connection(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        first = await recommend(client, "current time in Paris", NOW, "alice")
        second = await recommend(client, "convert 9am UTC to Tokyo time", CONVERT, "bob")
        await client.call_tool(CONVERT, CONVERT_ARGS)  # bob's tool first
        await client.call_tool(NOW, {"timezone": "Europe/Paris"})
    assert executions(db) == {
        f"{CONVERT}#0": ("bob", second, "convert 9am UTC to Tokyo time"),
        f"{NOW}#1": ("alice", first, "current time in Paris"),
    }


async def test_meta_decision_id_names_the_decision(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        older = await recommend(client, "time in Sydney", NOW, "alice")
        newer = await recommend(client, "time in Berlin", NOW, "bob")
        await client.call_tool(NOW, {"timezone": "Australia/Sydney"}, meta={"toolwise/decision_id": older})
        await client.call_tool(NOW, {"timezone": "Europe/Berlin"})  # the one still open
    assert executions(db) == {
        f"{NOW}#0": ("alice", older, "time in Sydney"),
        f"{NOW}#1": ("bob", newer, "time in Berlin"),
    }


async def test_a_call_with_no_decision_learns_in_its_own_session(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        await recommend(client, "time in Paris", NOW, "alice")
        await client.call_tool(CONVERT, CONVERT_ARGS)  # alice was recommended another tool
        await client.call_tool(NOW, {"timezone": "UTC"}, meta={"toolwise/session_id": "carol"})
    rows = executions(db)
    connection_session, decision, query = rows[f"{CONVERT}#0"]
    assert connection_session not in {"alice", "carol"} and decision is None and query is None
    assert rows[f"{NOW}#1"] == ("carol", None, None)  # alice's decision is for her session, not carol's
