"""The upkeep beside serving does not keep retrying a periodic snapshot the database refuses at every
tick: each try copies the learned state on the event loop and packs it (CPU for seconds with a large
state), so while the database fails it would cost the calls served a stall every tick. In-process
against a real SQLite file, the services as the server runs them."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from tests.server.test_persistence import QUERIES, TOOLS, call
from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.feedback.records import SnapshotRecord
from toolwise.server import upkeep as upkeep_module
from toolwise.server.services import Services
from toolwise.server.upkeep import Upkeep

TICKS = 20  # the upkeep's ticks the test watches


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_refused_periodic_snapshot_is_not_tried_again_at_every_tick(url: str) -> None:
    feedback = FeedbackService(url, flush_interval_ms=1)
    await feedback.start()
    # ticks of a millisecond; a snapshot due by rows after every learned call, never by time
    settings = Settings(database_url=url, seed=5, sync_interval_s=0.001, snapshot_rows=1, snapshot_interval_s=0)
    services = Services.open(settings, feedback)
    await services.learning.set_tools(TOOLS)
    tried: list[str] = []
    serving, ticked = asyncio.Event(), asyncio.Event()
    ticks = 0

    async def refused(snapshot: SnapshotRecord, *, keep: int) -> int:
        tried.append(snapshot.source)
        raise OSError(28, "No space left on device")

    async def follow_restores() -> None:
        nonlocal ticks
        ticks += 1
        serving.set()  # started up (an empty log: nothing to catch up with)
        if ticks == TICKS:
            ticked.set()

    feedback.snapshots.save = refused  # type: ignore[method-assign]  # the database refuses snapshots
    services.snapshots.follow_restores = follow_restores  # type: ignore[method-assign]  # counts the ticks
    upkeep = asyncio.create_task(Upkeep(services).run())
    await asyncio.wait_for(serving.wait(), 60)
    await call(services, "s", QUERIES[1], "git__git_log")  # learned: a snapshot is due
    await asyncio.wait_for(ticked.wait(), 60)
    upkeep.cancel()
    await asyncio.wait([upkeep])
    assert tried == ["periodic"]  # tried once, not once a tick
    await feedback.aclose()


async def test_with_sync_off_the_calls_learned_live_are_still_marked_once_many(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each own call learned live is kept by id (in memory and in every snapshot) until a sync sees it in the
    log: with sync off, none did while serving, so they grew with every call for as long as it ran."""
    monkeypatch.setattr(upkeep_module, "IDLE_TICK_S", 0.001)
    monkeypatch.setattr(upkeep_module, "UNMARKED_SYNC", 10**9)  # none while the calls are made
    feedback = FeedbackService(url, flush_interval_ms=1)
    await feedback.start()
    services = Services.open(Settings(database_url=url, seed=5, sync_interval_s=0, snapshot_interval_s=0), feedback)
    await services.learning.set_tools(TOOLS)
    serving, ticked, ticks = asyncio.Event(), asyncio.Event(), 0

    async def follow_restores() -> None:
        nonlocal ticks
        ticks += 1
        serving.set()
        if ticks == TICKS:
            ticked.set()

    services.snapshots.follow_restores = follow_restores  # type: ignore[method-assign]  # counts the ticks
    upkeep = asyncio.create_task(Upkeep(services).run())
    await asyncio.wait_for(serving.wait(), 60)
    for i in range(6):
        await call(services, f"s{i}", QUERIES[1], "git__git_log")
    await feedback.flush()
    assert services.learning.unmarked == 6
    monkeypatch.setattr(upkeep_module, "UNMARKED_SYNC", 4)
    ticks, ticked = 0, asyncio.Event()  # TICKS more from here
    await asyncio.wait_for(ticked.wait(), 60)
    upkeep.cancel()
    await asyncio.wait([upkeep])
    assert services.learning.unmarked == 0
    assert services.learning.covered.executions.floor == 6  # marked, not learned again
    assert services.learning.learner.updates == 6
    await feedback.aclose()


async def test_a_failing_database_is_said_once_in_a_line_and_its_recovery_too_not_a_traceback_every_tick(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A PostgreSQL server gone (or a full disk) fails every tick of the upkeep: the log says so in one line
    naming the driver's error, not three chained tracebacks every tick, and says when the database answers again."""
    feedback = FeedbackService(url, flush_interval_ms=1)
    await feedback.start()
    settings = Settings(database_url=url, seed=5, sync_interval_s=0.001, snapshot_interval_s=0)
    services = Services.open(settings, feedback)
    await services.learning.set_tools(TOOLS)
    answered = asyncio.Event()
    ticks = 0

    async def follow_restores() -> None:
        nonlocal ticks
        ticks += 1
        if ticks <= TICKS:
            raise OSError(111, "Connect call failed ('127.0.0.1', 5432)")
        if ticks > TICKS + 1:  # the tick after the first that worked: that one's end has been logged
            answered.set()

    services.snapshots.follow_restores = follow_restores  # type: ignore[method-assign]  # the database is gone
    with caplog.at_level(logging.INFO, logger=upkeep_module.__name__):
        upkeep = asyncio.create_task(Upkeep(services).run())
        await asyncio.wait_for(answered.wait(), 60)
        upkeep.cancel()
        await asyncio.wait([upkeep])
    await feedback.aclose()
    said = [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records if r.name == upkeep_module.__name__]
    failing = [s for s in said if s[0] == "ERROR"]
    assert len(failing) == 1 and failing[0][2] is None, said  # once, without a traceback
    assert "ConnectionRefusedError: [Errno 111] Connect call failed ('127.0.0.1', 5432)" in failing[0][1]
    assert [s for s in said if "answers again" in s[1]], said
