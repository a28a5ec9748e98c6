"""Every call in its conversation and tied to its decision, as an agent framework drives toolwise
(session_id on our tools, plain downstream calls): a plain call belongs to the conversation its
connection named last (or `_meta` names) and follows that conversation's open decision for its tool.
In-process through the MCP surface (`Client(server)`), the reference mcp-server-time downstream served
in-process, a real SQLite file read after shutdown."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from tests.server.surface import as_meta, time_server
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

NOW = "time__get_current_time"
CONVERT = "time__convert_time"
CONVERT_ARGS = {"source_timezone": "UTC", "time": "09:00", "target_timezone": "Asia/Tokyo"}


@asynccontextmanager
async def toolwise(db: Path) -> AsyncIterator[Client]:
    config = AppConfig.model_validate(
        {
            "mcpServers": {},  # the time server is served in-process
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{db}", "seed": 7, "snapshot_interval_s": 0},
        }
    )
    # The handshake era: an in-process 2026-07-28 request comes on no connection (downstream/callers.py),
    # so nothing ties a plain call to a decision made on another request.
    async with (
        Toolwise(config, in_process={"time": time_server()}) as app,
        Client(build_server(app), mode="legacy") as client,
    ):
        yield client


async def recommend(client: Client, query: str, tool: str, session_id: str) -> str:
    """A decision in `session_id` that recommends `tool` (candidates pin what is recommended)."""
    result = await client.call_tool(
        "recommend_tool", {"query": query, "session_id": session_id, "candidates": [tool], "top_k": 1}
    )
    assert not result.is_error, result.content
    return str(result.structured_content["decision_id"])


def executions(db: Path) -> dict[str, tuple[Any, ...]]:
    """Each call's (session as the client named it, decision, query), by tool + position in call order
    (the log keeps a named session scoped to its client: `conn-…/alice`)."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT tool, session_id, decision_id, query FROM executions ORDER BY seq").fetchall()
    return {
        f"{tool}#{i}": (session.partition("/")[2] or session, decision, query)
        for i, (tool, session, decision, query) in enumerate(rows)
    }


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


async def test_two_interleaved_conversations_on_one_connection_stay_two_chains(tmp_path: Path) -> None:
    """A plain call belongs to the conversation the connection named last, whatever was recommended."""
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        await recommend(client, "current time in Paris", NOW, "alice")
        bobs = await recommend(client, "convert 9am UTC to Tokyo time", CONVERT, "bob")
        await client.call_tool(CONVERT, CONVERT_ARGS)  # bob named last: bob's call
        await client.call_tool(NOW, {"timezone": "Europe/Paris"})  # still bob's, although alice was told NOW
        alices = await recommend(client, "and the time in Lisbon", NOW, "alice")
        await client.call_tool(NOW, {"timezone": "Europe/Lisbon"})
        ends = {
            name: await client.call_tool("end_session", {"session_id": name, "outcome": "success"})
            for name in ("alice", "bob")
        }
    assert ends["alice"].structured_content["tools"] == [NOW]
    assert ends["bob"].structured_content["tools"] == [CONVERT, NOW]
    rows = executions(db)
    assert rows[f"{CONVERT}#0"] == ("bob", bobs, "convert 9am UTC to Tokyo time")
    assert rows[f"{NOW}#1"][:2] == ("bob", None)
    assert rows[f"{NOW}#2"] == ("alice", alices, "and the time in Lisbon")


async def test_meta_decision_id_names_the_decision(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        older = await recommend(client, "time in Sydney", NOW, "alice")
        newer = await recommend(client, "time in Berlin", NOW, "bob")
        await client.call_tool(NOW, {"timezone": "Australia/Sydney"}, meta=as_meta({"toolwise/decision_id": older}))
        await client.call_tool(NOW, {"timezone": "Europe/Berlin"})  # the one still open
    assert executions(db) == {
        f"{NOW}#0": ("alice", older, "time in Sydney"),
        f"{NOW}#1": ("bob", newer, "time in Berlin"),
    }


async def test_a_call_of_a_tool_not_recommended_stays_in_the_conversation(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        alices = await recommend(client, "time in Paris", NOW, "alice")
        await client.call_tool(CONVERT, CONVERT_ARGS)  # alice was recommended another tool: still alice's
        await client.call_tool(NOW, {"timezone": "UTC"}, meta=as_meta({"toolwise/session_id": "carol"}))
        await client.call_tool(CONVERT, CONVERT_ARGS)  # _meta named carol for that call only
    rows = executions(db)
    assert rows[f"{CONVERT}#0"][:2] == ("alice", alices)  # made under alice's decision, not following it
    assert rows[f"{NOW}#1"] == ("carol", None, None)  # alice's decision is for her session, not carol's
    assert rows[f"{CONVERT}#2"][:2] == ("alice", None)


async def test_a_connection_back_from_an_ended_conversation_is_its_own_again(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with toolwise(db) as client:
        await recommend(client, "time in Paris", NOW, "alice")
        await client.call_tool(NOW, {"timezone": "Europe/Paris"})
        await client.call_tool("end_session", {"session_id": "alice", "outcome": "success"})
        await client.call_tool(CONVERT, CONVERT_ARGS)
    rows = executions(db)
    assert rows[f"{NOW}#0"][0] == "alice" and rows[f"{CONVERT}#1"][0] != "alice"
