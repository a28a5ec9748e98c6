from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from toolwise.feedback import Execution, FeedbackService, Rating, utcnow
from toolwise.feedback.engine import SQLiteWriteThread


def make_execution(
    tool: str = "time__get_current_time",
    *,
    success: bool = True,
    latency_ms: float = 12.0,
    session_id: str = "s1",
    **fields: object,
) -> Execution:
    finished = utcnow()
    return Execution(
        tool=tool,
        server=tool.split("__", maxsplit=1)[0],
        session_id=session_id,
        success=success,
        latency_ms=latency_ms,
        started_at=finished - timedelta(milliseconds=latency_ms),
        finished_at=finished,
        **fields,  # type: ignore[arg-type]
    )


async def ratings_of(service: FeedbackService, execution_id: str) -> list[Rating]:
    """An execution's ratings, oldest first, as the log hands them to learners."""
    return [
        e.rating
        async for batch in service.reads.iter_rating_events()
        for e in batch.events
        if e.execution.id == execution_id
    ]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


@pytest.fixture
async def service(db_url: str) -> AsyncIterator[FeedbackService]:
    async with FeedbackService(db_url) as svc:
        yield svc


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """While the flag is up, every batch commit fails as on a full disk."""
    full = [True]
    original = SQLiteWriteThread._execute

    def execute(self: SQLiteWriteThread, sql: str, params: object, then: object = None) -> None:
        if full[0]:
            raise OSError(28, "No space left on device")
        original(self, sql, params, then)  # type: ignore[arg-type]

    monkeypatch.setattr(SQLiteWriteThread, "_execute", execute)
    return full


def rerated(reward: float, rating: int, previous: int | None) -> float:
    """A reward moved by a rating's points, 2 a star from 3 (the default weights)."""
    return reward + 2 * (rating - 3) - (0 if previous is None else 2 * (previous - 3))
