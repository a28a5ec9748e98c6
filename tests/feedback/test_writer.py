"""The group-commit writer survives what callers and the disk do to it: a waiter cancelled with its
request, a database that refuses every write (a full disk), a shutdown while it still refuses."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection
from sqlalchemy.exc import InterfaceError

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService, StoreUnavailableError
from toolwise.feedback.database import Database


async def test_a_cancelled_flush_leaves_the_writer_running(service: FeedbackService) -> None:
    for _ in range(20):
        await service.log.record_execution(make_execution())
        flush = asyncio.create_task(service.flush())
        await asyncio.sleep(0)
        flush.cancel()  # the request that wanted fresh figures went away
        with contextlib.suppress(asyncio.CancelledError):
            await flush
    [metrics] = await service.reports.get_tool_metrics()
    assert metrics.calls == 20


async def test_a_full_disk_is_reported_bounded_and_loses_nothing_once_it_recovers(
    db_url: str, full_disk: list[bool]
) -> None:
    async with FeedbackService(db_url, max_queue=10, batch_size=5, store_timeout_s=0.3) as svc:
        for _ in range(10):
            await svc.log.record_execution(make_execution())
        while svc.stats.failing is None:
            await asyncio.sleep(0.01)
        assert "No space left on device" in svc.stats.failing
        assert svc.stats.health().startswith("failing since")
        with pytest.raises(StoreUnavailableError, match="No space left on device"):
            await svc.flush()  # a reader gets a readable error, not a hang
        with pytest.raises(StoreUnavailableError, match="queue is full"):
            for _ in range(100):  # no waiting forever for room: an error once the queue (10) is full
                await svc.log.record_execution(make_execution())
        full_disk[0] = False
        await svc.flush()
        assert svc.stats.failing is None and svc.stats.health() == "ok"
        assert svc.stats.committed == svc.stats.enqueued and svc.stats.dead_lettered == 0


async def test_shutdown_on_a_failing_database_dead_letters_the_rest(
    db_url: str, tmp_path: Path, full_disk: list[bool]
) -> None:
    dead = tmp_path / "dead.jsonl"
    svc = FeedbackService(db_url, dead_letter_path=dead, store_timeout_s=0.3)
    await svc.start()
    ids = [await svc.log.record_execution(make_execution()) for _ in range(30)]
    await asyncio.wait_for(svc.aclose(), 10)  # bounded: it does not retry for ever
    kept = [json.loads(line)["execution"]["id"] for line in dead.read_text().splitlines()]
    assert sorted(kept) == sorted(ids)


async def test_a_flush_cancelled_just_as_its_records_commit_ends_cancelled(service: FeedbackService) -> None:
    # On Python 3.11, asyncio.wait_for returned the result when the cancellation and the result met,
    # dropping the cancellation: a task stopped that way (shutdown cancelling the upkeep) ran on for ever.
    dropped = cancelled = 0
    for attempt in range(60):
        await service.log.record_execution(make_execution())
        committed = service.stats.committed
        flush = asyncio.create_task(service.flush())
        while service.stats.committed == committed:  # cancel a few loop steps after its records commit
            await asyncio.sleep(0)
        for _ in range(attempt % 6):
            await asyncio.sleep(0)
        if not flush.cancel():
            continue
        try:
            await flush
        except asyncio.CancelledError:
            cancelled += 1
        else:
            dropped += 1
    assert (dropped, cancelled > 0) == (0, True)


async def check_a_commit_whose_answer_was_lost(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection drops while COMMIT's answer is on its way: the batch is stored, the writer sees a
    lost connection and tries again. Its retry met the ids it had just stored, and every record of the
    batch was dead-lettered, each logged as not written, though all were in the log."""
    original = Database.execute
    lost = [True]

    async def execute(self: Database, sql: str, params: Sequence[Any], then: Callable[[Connection], None]) -> None:
        await original(self, sql, params, then)
        if lost[0]:
            lost[0] = False
            cause = ConnectionResetError("connection was closed in the middle of operation")
            raise InterfaceError("COMMIT", None, cause, connection_invalidated=True)

    monkeypatch.setattr(Database, "execute", execute)
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    dead = tmp_path / "dead.jsonl"
    with caplog.at_level(logging.WARNING):
        async with FeedbackService(url, dead_letter_path=dead, batch_size=5) as svc:
            ids = [await svc.log.record_execution(make_execution(namespace=namespace)) for _ in range(5)]
            await svc.flush()
            assert not lost[0], "the commit's answer was not lost: the test proves nothing"
            assert (svc.stats.committed, svc.stats.dead_lettered) == (5, 0)
            assert await svc.reads.count_executions(namespace) == 5
            [metrics] = await svc.reports.get_tool_metrics(namespace=namespace)
            assert metrics.calls == 5  # the tool's summary counted each call once
            assert None not in [await svc.reads.get_execution(i) for i in ids]
    assert not dead.exists() or not dead.read_text()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


async def test_a_commit_whose_answer_was_lost_is_stored_once_on_sqlite(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await check_a_commit_whose_answer_was_lost(db_url, tmp_path, monkeypatch, caplog)


async def test_a_commit_whose_answer_was_lost_is_stored_once_on_postgresql(
    pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await check_a_commit_whose_answer_was_lost(pg_url, tmp_path, monkeypatch, caplog)
