"""What an instance keeps of the sessions it learns from the shared log is bounded whatever their length:
a session of another instance's that goes on for ever (a stdio client's connection) keeps its recent tools
only, as that instance's own memory of it does. In-process against a real SQLite file."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event

from tests.server.test_persistence import QUERIES, proxied, service
from toolwise.downstream.outcome import CallOutcome
from toolwise.feedback import utcnow
from toolwise.learning import replaying
from toolwise.server.services import Services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_long_session_learned_from_the_log_keeps_a_bounded_window_of_tools(url: str) -> None:
    feedback, services = await service(url, session_window=8)
    other_feedback, other = await service(url, session_window=8)
    tools = ["git__git_status", "git__git_log", "git__git_diff"]
    for i in range(600):
        proxied(services, "long", tools[i % 3])
    await services.learning.drain()
    await feedback.flush()
    assert await other.sharing.sync() == 600
    kept = other.sharing._logged["long"]
    assert len(kept) <= 16  # tools remembered
    assert kept.before(600, other.learning.history_n) == [tools[i % 3] for i in range(600 - 2, 600)]  # still in order
    proxied(services, "long", tools[0])
    await services.learning.drain()
    await feedback.flush()
    assert await other.sharing.sync() == 1  # and goes on with the session
    assert other.sharing._logged["long"].before(601, 2) == [tools[599 % 3], tools[0]]
    await other_feedback.aclose()
    await feedback.aclose()


def _call(services: Services, session_id: str, *, ok: bool = True, tool: str = "git__git_diff") -> str:
    """A call of `tool` in `session_id` (a failure the tool's: read in hindsight, rl/hindsight.py)."""
    return services.learning.note(
        services.learning.sessions.get(session_id),
        tool=tool,
        server="git",
        arguments=None,
        outcome=CallOutcome(result_size=10) if ok else CallOutcome("ToolError", "boom", 10),
        started_at=utcnow(),
        latency_ms=20.0,
    )


def _learned(services: Services) -> list[tuple[str, float]]:
    decision = services.learning.learner.recommend(QUERIES[0], np.random.default_rng(0), top_k=4)
    return [(r.tool, r.expected) for r in decision.ranked] + [("updates", services.learning.learner.updates)]


async def test_another_instances_session_end_is_read_as_it_read_it_live_a_failure_waiting_for_it_included(
    url: str,
) -> None:
    """The default policy reads a failure once its session's next call is known, or the session ended: A read
    its session's failed last call as ended at end_session; B, learning A's log, read it as a retry of the
    tool by the next session of that name (an agent framework's conversation name), or never (it waited)."""
    feedback, a = await service(url)
    other_feedback, b = await service(url)
    _call(a, "s", ok=False)
    await a.learning.drain()
    await a.agent.end_session("s", "failure")
    _call(a, "s", ok=True)  # a new session of that name
    await a.learning.drain()
    await feedback.flush()
    assert await b.sharing.sync() == 2
    assert "s" not in b.learning.learner.waiting
    assert _learned(b) == _learned(a)
    await other_feedback.aclose()
    await feedback.aclose()


async def test_a_rating_committed_while_a_sync_read_the_executions_waits_for_its_call_to_be_learned(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync reads the log's executions, then its ratings: a call and its rating committed in between (an
    agent rating a call at once) had the rating learned before the call. A rating of 1 learned so made the
    tool the first pick (P(works) 0.75) where the instance that served it put it last (0.25)."""
    feedback, a = await service(url)
    other_feedback, b = await service(url)
    rated = a.learning.sessions.get("first")
    _call(a, "first", tool="git__git_log")
    await a.agent.rate(rated, 5, None, "git__git_log", None)  # B has ratings to read in its next sync
    sync_executions = b.sharing._sync_executions

    async def then_a_call_and_its_rating(*args: Any, **kwargs: Any) -> tuple[int, int, bool]:
        read = await sync_executions(*args, **kwargs)
        _call(a, "second", tool="git__git_log")
        await a.agent.rate(a.learning.sessions.get("second"), 1, None, "git__git_log", None)
        await feedback.flush()
        return read

    monkeypatch.setattr(b.sharing, "_sync_executions", then_a_call_and_its_rating)
    await feedback.flush()
    assert await b.sharing.sync() == 2  # the first call and its rating; the second's rating waits for it
    monkeypatch.undo()
    assert await b.sharing.sync() == 2
    assert await b.sharing.sync() == 0
    assert _learned(b) == _learned(a)
    await other_feedback.aclose()
    await feedback.aclose()


async def test_a_session_end_whose_waiting_failure_cannot_be_learned_is_marked_and_the_sync_goes_on(
    url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Learning a failure waiting for its session's end raised out of the sync's batch: the sync failed at
    every tick on that entry, nothing after it learned, and the call before the end learned again each time."""
    feedback, a = await service(url)
    other_feedback, b = await service(url)
    _call(a, "s", ok=False)
    await a.learning.drain()
    await a.agent.end_session("s", "failure")
    _call(a, "t", ok=True, tool="git__git_log")
    await a.learning.drain()
    await feedback.flush()
    learner = b.learning.learner
    read_waiting = learner.read_waiting

    def broken(session: str, rng: Any, *, next_tool: str | None = None) -> None:
        if next_tool is None and session in learner.waiting:  # read as its session's end
            raise ValueError("a learning step failed")
        read_waiting(session, rng, next_tool=next_tool)

    monkeypatch.setattr(learner, "read_waiting", broken)
    with caplog.at_level(logging.ERROR, logger=replaying.__name__):
        assert await b.sharing.sync() == 2
    assert any("end of session s" in r.getMessage() and r.exc_info for r in caplog.records)
    assert await b.sharing.sync() == 0
    assert learner.updates == 2 and not any(b.learning.covered.executions.fresh(seq) for seq in (1, 2))
    await other_feedback.aclose()
    await feedback.aclose()


async def test_an_idle_namespace_reads_the_other_namespaces_ratings_once_not_at_every_sync(
    tmp_path: Path, url: str
) -> None:
    """Rating ids are one sequence for every namespace: another namespace's were holes to a namespace's rating
    watermark, which steps over a hole only beside a rating of its own learned since. An instance whose namespace
    rated nothing more read every rating the others made since its last, at every sync (every 2 s): 2,500 ratings
    were 9 statements a tick, growing with the log. Its own ratings, between the others', are learned once."""
    feedback, x = await service(url, namespace="x")
    other_feedback, y = await service(url, namespace="y")
    reader_feedback, reader = await service(url, namespace="x")
    rated = _call(x, "a", tool="git__git_log")
    await x.agent.rate(x.learning.sessions.get("a"), 5, rated, None, None)
    others = [_call(y, f"y{i}", tool="git__git_log") for i in range(50)]
    await y.learning.drain()
    await other_feedback.flush()
    with sqlite3.connect(tmp_path / "toolwise.db") as conn:  # many ratings of the other namespace, at once
        conn.executemany(
            "INSERT INTO ratings (execution_id, rating, created_at) VALUES (?, 4, '2026-11-27 00:00:00+00:00')",
            [(others[i % 50],) for i in range(2_500)],
        )
    await x.agent.rate(x.learning.sessions.get("a"), 1, rated, None, None)  # after them
    await feedback.flush()
    assert await reader.sharing.sync() == 3  # the call and its two ratings
    statements: list[str] = []
    event.listen(reader_feedback.engine.sync_engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    for _ in range(3):
        assert await reader.sharing.sync() == 0
    assert len(statements) == 3, statements  # the one probe of the log's heads a sync
    assert _learned(reader) == _learned(x)
    for service_feedback in (reader_feedback, other_feedback, feedback):
        await service_feedback.aclose()
