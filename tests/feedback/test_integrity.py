"""A database file with a damaged page is reported: a check in the background after start logs it and the
store's health says so; a sound file reports nothing."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService


async def write_log(db: Path, calls: int = 300) -> None:
    """A database as toolwise leaves it: `calls` executions, checkpointed into the file at close."""
    async with FeedbackService(f"sqlite+aiosqlite:///{db}") as svc:
        for _ in range(calls):
            await svc.log.record_execution(make_execution(query="which tool reads the time?"))


def damage_a_page(db: Path) -> int:
    """Overwrite the cells of the executions table's root page (not the file's header); its number."""
    with sqlite3.connect(db) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'executions'").fetchone()[0]
    conn.close()
    with db.open("r+b") as f:
        f.seek((root - 1) * page_size + page_size // 2)  # the cells sit at the end of their page
        f.write(b"\xff" * (page_size // 2))
    return int(root)


async def checked(svc: FeedbackService) -> list[str]:
    assert svc.integrity is not None
    for _ in range(1000):
        if svc.integrity.problems is not None:
            return svc.integrity.problems
        await asyncio.sleep(0.01)
    raise AssertionError("the integrity check did not run")


async def test_a_damaged_page_is_reported_in_the_log_and_the_store_health(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "toolwise.db"
    await write_log(db)
    page = damage_a_page(db)
    with caplog.at_level(logging.ERROR):
        async with FeedbackService(f"sqlite+aiosqlite:///{db}", integrity_check_after_s=0) as svc:
            problems = await checked(svc)
            assert problems and any(f"page {page}" in p for p in problems)
            health = svc.stats.health()  # what get_learning_stats, the heartbeat and `inspect status` say
            assert health.startswith(f"damaged: {db} is damaged: ") and f"page {page}" in health
    [error] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert str(db) in error and "quick_check found" in error and ".recover" in error


async def test_a_sound_file_reports_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "toolwise.db"
    await write_log(db, calls=20)
    with caplog.at_level(logging.WARNING):
        async with FeedbackService(f"sqlite+aiosqlite:///{db}", integrity_check_after_s=0) as svc:
            assert await checked(svc) == []
            assert svc.stats.health() == "ok"
    assert not caplog.records


async def test_the_check_waits_after_start_and_shutdown_does_not_wait_for_it(tmp_path: Path) -> None:
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", integrity_check_after_s=60) as svc:
        assert svc.integrity is not None
    assert svc.integrity.problems is None  # closed before it was due: never ran, and the close did not wait
