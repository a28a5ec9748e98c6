"""Nothing a client does grows toolwise without bound: a long session keeps a recent window, an
over-long query is refused naming the limit, and a query is stored once, not on every later call
(while a restart still learns every call in its context)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.server.test_persistence import QUERIES, proxied, service
from toolwise.feedback import Execution, FeedbackService
from toolwise.rl import Step, StepColumns


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_long_session_keeps_a_bounded_window_of_calls(url: str) -> None:
    feedback, services = await service(url, session_window=8)
    tools = ["git__git_status", "git__git_log", "git__git_diff"]
    ids = [proxied(services, "long", tools[i % 3]) for i in range(1000)]
    await services.learning.drain()
    session = services.learning.sessions.get("long")
    assert len(session.calls) <= 16 and session.length == 1000
    newest = await feedback.reads.get_execution(ids[-1])
    assert newest is not None and newest.position == 999  # positions go on counting
    _, reward = await services.agent.rate(session, 5, None, "git__git_log", None)  # recent calls rate by name
    assert reward > 10
    episode = await services.agent.end_session("long", "success")
    assert episode.total_reward == pytest.approx(sum(e.reward or 0.0 for e in await _all(feedback)))
    await feedback.aclose()


async def _all(feedback: FeedbackService) -> list[Execution]:
    return [e async for batch in feedback.reports.iter_executions() for e in batch]


async def test_an_over_long_query_is_cut_to_the_limit(url: str) -> None:
    feedback, services = await service(url, max_query_chars=100)
    session = services.learning.sessions.get("s")
    decision = await services.agent.recommend(session, "show the git log " + "x" * 500, 3, None)
    assert decision.ranked, "a long request still gets recommendations"
    assert session.query == ("show the git log " + "x" * 500)[:100]
    await feedback.aclose()


async def test_a_query_is_stored_once_and_a_restart_still_learns_in_its_context(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, first = await service(url)
    asked = {}
    for s in range(6):
        session = first.learning.sessions.get(f"s{s}")
        asked[session.id] = QUERIES[s % 3] + " please, in detail" * 20
        await first.agent.recommend(session, asked[session.id], 3, None)
        for tool in ("git__git_log", "git__git_status", "git__git_diff", "git__git_log"):
            proxied(first, session.id, tool)
        await first.learning.drain()
        await first.agent.rate(session, 5 if s % 2 else 1, None, "git__git_status", None)
    await feedback.aclose()
    with sqlite3.connect(tmp_path / "toolwise.db") as conn:
        assert conn.execute("SELECT count(*), count(query) FROM executions").fetchone() == (24, 6)

    feedback, second = await service(url)
    learned: list[tuple[str | None, int | None]] = []
    for name in ("learn", "observe_rating"):
        original = getattr(second.learning.learner, name)

        def spy(step: Step, *args: object, _original: object = original) -> object:
            learned.append((step.query, step.rating))
            return _original(step, *args)  # type: ignore[operator]  # the method the spy replaced

        monkeypatch.setattr(second.learning.learner, name, spy)

    learn_many = second.learning.learner.learn_many

    def spy_columns(steps: StepColumns, rng: np.random.Generator, **kwargs: Any) -> np.ndarray:  # a replay's batches
        learned.extend((step.query, step.rating) for step in steps.steps())
        return learn_many(steps, rng, **kwargs)

    monkeypatch.setattr(second.learning.learner, "learn_many", spy_columns)
    await second.snapshots.restore_latest()  # no snapshot: the whole log is replayed, each call in its context
    expected = [asked[f"s{s}"] for s in range(6) for _ in range(4)] + [asked[f"s{s}"] for s in range(6)]
    assert [query for query, _ in learned] == expected
    assert [rating for _, rating in learned][24:] == [5 if s % 2 else 1 for s in range(6)]
    await feedback.aclose()
