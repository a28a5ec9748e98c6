"""submit_feedback by tool name beyond the caller's session: the newest call of the tool in a bounded
window of the log, never another live client's. In process (2026-07-28 in process has no connection:
each request is a session of its own, as over 2026-07-28 HTTP), the toy downstream, a real SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from mcp import Client
from sqlalchemy import event

from tests.server import toy_server
from tests.server.surface import execution_of, running, text
from toolwise.config import InProcessServer
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

ECHO = "toy__echo"


async def test_a_call_older_than_the_window_is_not_rated_by_tool_name(tmp_path: Path) -> None:
    async with running(tmp_path, mode="auto") as (_, client):
        old = execution_of(await client.call_tool(ECHO, {"text": "long ago"}))
        await client.call_tool("get_tool_metrics", {})  # recorded: the log holds it
        with sqlite3.connect(tmp_path / "toolwise.db") as conn:
            conn.execute("UPDATE executions SET finished_at = datetime(finished_at, '-11 minutes')")
        stale = await client.call_tool("submit_feedback", {"rating": 4, "tool": ECHO})
        recent = execution_of(await client.call_tool(ECHO, {"text": "now"}))
        rated = await client.call_tool("submit_feedback", {"rating": 4, "tool": ECHO})
    assert stale.is_error and "no call of 'toy__echo' in this session or in the last 10 minutes" in text(stale)
    assert not rated.is_error and rated.structured_content["execution_id"] == recent != old


async def test_a_call_made_through_another_running_instance_is_not_rated_by_tool_name(tmp_path: Path) -> None:
    async with running(tmp_path, mode="auto") as (app, client):
        config = app.config.model_copy(deep=True)
        toy = {"toy": InProcessServer(toy_server.build())}
        async with Toolwise(config, in_process=toy) as other, Client(build_server(other), mode="auto") as elsewhere:
            called = await elsewhere.call_tool(ECHO, {"text": "theirs"})
            await elsewhere.call_tool("get_tool_metrics", {})  # recorded: the shared log holds it
            refused = await client.call_tool("submit_feedback", {"rating": 1, "tool": ECHO})
            by_id = {"rating": 1, "execution_id": execution_of(called)}
            assert not (await client.call_tool("submit_feedback", by_id)).is_error
    assert refused.is_error and text(refused).startswith("submit_feedback: the newest call of 'toy__echo' (")
    assert text(refused).endswith(
        "s ago) was made through another toolwise instance, still running: pass execution_id (the call's "
        "_meta['toolwise/execution_id'])"
    )


async def test_a_rating_by_tool_name_reads_only_the_instance_that_made_the_call(tmp_path: Path) -> None:
    """Every start leaves its row in `instances` (a stdio client starts one per session, the Inspector CLI one
    per call) and nothing removes it: whether the call's instance still runs is read from its row alone."""
    async with running(tmp_path, mode="auto") as (app, client):
        config = app.config.model_copy(deep=True)
        toy = {"toy": InProcessServer(toy_server.build())}
        async with Toolwise(config, in_process=toy) as other, Client(build_server(other), mode="auto") as elsewhere:
            called = execution_of(await elsewhere.call_tool(ECHO, {"text": "theirs, before it stopped"}))
            await elsewhere.call_tool("get_tool_metrics", {})  # recorded: the shared log holds it
        read: list[str] = []

        def note(conn: object, cursor: object, statement: str, *rest: object) -> None:
            if "FROM instances" in statement:
                read.append(" ".join(statement.split()))

        engine = app.feedback.database.engine.sync_engine
        event.listen(engine, "before_cursor_execute", note)
        try:
            rated = await client.call_tool("submit_feedback", {"rating": 4, "tool": ECHO})
        finally:
            event.remove(engine, "before_cursor_execute", note)
    assert not rated.is_error and rated.structured_content["execution_id"] == called  # its instance has stopped
    assert read and all("WHERE instances.id = " in s for s in read), read


async def test_an_empty_session_id_rates_by_tool_name_as_none_does(tmp_path: Path) -> None:
    """Every tool reads `session_id: ""` (what a framework sends for "no conversation") as no session named;
    submit_feedback alone took it as a session named, so its rating by tool name looked only in the request's
    own session and never in the log, where a 2026-07-28 request's earlier call is."""
    async with running(tmp_path, mode="auto") as (_, client):
        called = execution_of(await client.call_tool(ECHO, {"text": "mine"}))
        await client.call_tool("get_tool_metrics", {})  # recorded: the log holds it
        rated = await client.call_tool("submit_feedback", {"rating": 4, "tool": ECHO, "session_id": ""})
    assert not rated.is_error, text(rated)
    assert rated.structured_content["execution_id"] == called
