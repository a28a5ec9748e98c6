"""A database that refuses writes (a full disk) is loud, not invisible: proxied calls still answer,
our tools that need the database answer an error naming it within a bounded time, the others still
answer, and the health views say the store is failing. Nothing is lost once it recovers."""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.feedback.conftest import full_disk  # noqa: F401 - the fixture
from tests.server.surface import execution_of, text, time_server
from toolwise.config import AppConfig
from toolwise.feedback.database import Database
from toolwise.feedback.log import ExecutionLog
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


def config(tmp_path: Path) -> AppConfig:
    return AppConfig.model_validate(
        {
            "mcpServers": {},  # the time server is served in-process
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", "store_timeout_s": 0.5},
        }
    )


async def test_a_full_disk_is_reported_to_clients_and_health(tmp_path: Path, full_disk: list[bool]) -> None:  # noqa: F811
    async with (
        Toolwise(config(tmp_path), in_process={"time": time_server()}) as app,
        Client(build_server(app), mode="legacy") as client,
    ):
        answered = []
        for _ in range(5):
            result = await client.call_tool("time__convert_time", CONVERT)
            assert not result.is_error  # the downstream worked: the caller gets its answer
            answered.append(execution_of(result))
        metrics = await asyncio.wait_for(client.call_tool("get_tool_metrics", {}), 5)
        assert metrics.is_error and "No space left on device" in text(metrics)
        rating = await asyncio.wait_for(client.call_tool("submit_feedback", {"rating": 4}), 5)
        assert rating.is_error and "database is failing" in text(rating)
        stats = await client.call_tool("get_learning_stats", {})
        assert not stats.is_error and stats.structured_content["store"].startswith("failing since")
        assert "No space left on device" in (await app.upkeep.status())["store"]
        assert "toolwise_store_failing 1.0" in (await app.metrics.render()).decode()
        full_disk[0] = False
        async with asyncio.timeout(10):  # the writer retries on its own backoff (up to 2 s between tries)
            while app.feedback.stats.failing is not None:
                await asyncio.sleep(0.05)
        await app.feedback.flush()
        assert (await client.call_tool("get_learning_stats", {})).structured_content["store"] == "ok"
    with sqlite3.connect(tmp_path / "toolwise.db") as conn:
        assert sorted(i for (i,) in conn.execute("SELECT id FROM executions")) == sorted(answered)


async def test_shutdown_on_a_full_disk_ends_and_dead_letters_what_was_not_written(
    tmp_path: Path,
    full_disk: list[bool],  # noqa: F811
) -> None:
    async with (
        Toolwise(config(tmp_path), in_process={"time": time_server()}) as app,
        Client(build_server(app), mode="legacy") as client,
    ):
        answered = [execution_of(await client.call_tool("time__convert_time", CONVERT))]
        answered += [execution_of(await client.call_tool("time__convert_time", CONVERT))]
        dead = app.feedback.dead_letter_path
    # The context exited (no exception, no hang) with the disk still full: nothing answered is lost.
    kept = {json.loads(line)["execution"]["id"] for line in dead.read_text().splitlines()}
    assert set(answered) <= kept


async def test_shutdown_on_a_database_that_never_answers_ends_and_dead_letters_the_last_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A store that takes a statement and never answers (PostgreSQL waiting on a lock, a network partition):
    # SIGTERM must still end toolwise, the records it holds dead-lettered, the log saying how to get them back.
    hung = asyncio.Event()
    never = asyncio.Event()
    write, execute = Database.write, Database.execute

    async def hanging_write(self: Database, work: Any) -> Any:
        if hung.is_set():
            await never.wait()
        return await write(self, work)

    async def hanging_execute(self: Database, sql: str, params: Any, then: Any) -> None:
        if hung.is_set():
            await never.wait()
        await execute(self, sql, params, then)

    monkeypatch.setattr(Database, "write", hanging_write)
    monkeypatch.setattr(Database, "execute", hanging_execute)
    app = Toolwise(config(tmp_path), in_process={"time": time_server()})
    await app.__aenter__()
    async with Client(build_server(app), mode="legacy") as client:
        await app.feedback.flush()
        hung.set()
        answered = {execution_of(await client.call_tool("time__convert_time", CONVERT)) for _ in range(2)}
    dead = app.feedback.dead_letter_path
    with caplog.at_level(logging.ERROR):
        async with asyncio.timeout(30):  # before the fix: for ever
            await app.__aexit__(None, None, None)
    kept = {json.loads(line)["execution"]["id"] for line in dead.read_text().splitlines()}
    assert answered <= kept
    assert "no shutdown snapshot" in caplog.text
    assert f"toolwise import-dead-letters {dead}" in caplog.text


async def test_shutdown_with_a_rating_under_way_on_a_database_that_never_answers_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # A rating whose caller went away goes on, and a shutdown waits for it (so that it is stored): not for
    # ever when the database never answers its write. SIGTERM ends toolwise, the log naming what was lost.
    hung, writing = asyncio.Event(), asyncio.Event()
    never = asyncio.Event()
    write = Database.write

    async def hanging_write(self: Database, work: Any) -> Any:
        if hung.is_set() and work.__qualname__.startswith(f"{ExecutionLog.add_rating.__qualname__}."):
            writing.set()  # the rating's own write (a heartbeat's meanwhile is answered)
            await never.wait()
        return await write(self, work)

    monkeypatch.setattr(Database, "write", hanging_write)
    app = Toolwise(config(tmp_path), in_process={"time": time_server()})
    await app.__aenter__()
    async with Client(build_server(app), mode="legacy") as client:
        execution_id = execution_of(await client.call_tool("time__convert_time", CONVERT))
        await app.feedback.flush()
        hung.set()
        rating = asyncio.create_task(client.call_tool("submit_feedback", {"execution_id": execution_id, "rating": 5}))
        async with asyncio.timeout(30):
            await writing.wait()  # the rating's write under way, never answered
        rating.cancel()  # its client goes away
        await asyncio.wait([rating])
    with caplog.at_level(logging.ERROR):
        async with asyncio.timeout(30):  # before the fix: for ever
            await app.__aexit__(None, None, None)
    assert execution_id in caplog.text  # the rating left unstored is named
