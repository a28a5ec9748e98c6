"""A rating or a session's end is learned exactly once and stays learned, whatever happens while it is
on its way: a snapshot taken, a sync, a restore followed, the database failing, the caller going away.
In process against a real SQLite file: the services as the server runs them, without the MCP surface."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_persistence import proxied, service
from toolwise.errors import UserError
from toolwise.feedback import Episode, Execution, FeedbackService, StoreUnavailableError
from toolwise.feedback.records import RatingEvent
from toolwise.learning.service import with_session_query
from toolwise.learning.worker import LEARN_CHUNK
from toolwise.server.services import Services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def rated_with(
    services: Services, monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Awaitable[object]]
) -> int:
    """Rate a call, `meanwhile` running once the rating is committed and before it is learned (while its
    call's query is read); returns how many learning updates the rating and `meanwhile` added."""
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log")
    await services.learning.drain()
    before = services.learning.learner.updates

    async def first_meanwhile(feedback: FeedbackService, execution: Execution, namespace: str) -> Execution:
        await meanwhile()
        return await with_session_query(feedback, execution, namespace)

    monkeypatch.setattr("toolwise.learning.agent.with_session_query", first_meanwhile)
    await services.agent.rate(session, 1, execution_id, None, None)
    return services.learning.learner.updates - before


async def test_a_rating_on_its_way_when_a_snapshot_is_taken_is_learned_after_a_restart_from_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, live = await service(url)
    assert await rated_with(live, monkeypatch, lambda: live.snapshots.save("periodic")) == 1
    learned = live.learning.learner.updates
    await feedback.aclose()  # a crash: the periodic snapshot is the newest

    feedback, restarted = await service(url)
    report = await restarted.snapshots.restore_latest()
    assert restarted.learning.learner.updates == learned, report  # the rating was not lost
    await feedback.aclose()


async def test_a_rating_a_sync_learns_on_its_way_is_not_learned_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(url)

    async def sync() -> Any:
        await feedback.flush()
        return await services.sharing.sync()

    assert await rated_with(services, monkeypatch, sync) == 1
    assert await services.sharing.sync() == 0
    await feedback.aclose()


async def test_a_rating_on_its_way_when_another_process_s_restore_is_followed_is_learned_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(url)
    other_feedback, other = await service(url)
    await other.snapshots.adopt(await other.snapshots.save("manual"), "restore")  # as `toolwise snapshot restore`
    restored: list[int] = []

    async def follow() -> None:
        await services.snapshots.follow_restores()
        restored.append(services.learning.learner.updates)

    await rated_with(services, monkeypatch, follow)
    await services.sharing.sync()
    # the restored state had learned neither the call nor its rating: the sync learns the call, the rating once
    assert services.learning.learner.updates == restored[0] + 2
    await feedback.aclose()
    await other_feedback.aclose()


async def ended_session(url: str) -> tuple[FeedbackService, Services, int]:
    """A TD learner (an end teaches it) with a session of two calls learned; returns its updates so far."""
    feedback, services = await service(url, policy="ucb")
    for tool in ("git__git_status", "git__git_log"):
        proxied(services, "s", tool)
    await services.learning.drain()
    return feedback, services, services.learning.learner.updates


def episodes(tmp_path: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(tmp_path / "toolwise.db") as conn:
        return conn.execute("SELECT session_id, outcome FROM episodes").fetchall()


async def test_an_end_the_database_refused_is_ended_by_its_retry_recorded_and_learned_once(
    url: str, tmp_path: Path
) -> None:
    feedback, services, updates = await ended_session(url)
    record = feedback.log.record_episode
    refusals = [StoreUnavailableError("the database is unavailable (disk full)")]

    async def refused_once(episode: Episode) -> Episode:
        if refusals:
            raise refusals.pop()
        return await record(episode)

    feedback.log.record_episode = refused_once  # type: ignore[method-assign]  # a failing store in its place
    with pytest.raises(StoreUnavailableError):
        await services.agent.end_session("s", "failure")
    ended = await services.agent.end_session("s", "success")  # the client tries again: the session is still open
    assert ended.tools == ["git__git_status", "git__git_log"]
    assert episodes(tmp_path) == [("s", "success")]
    assert services.learning.learner.updates == updates + 1  # its end learned once, not at each try
    assert await services.sharing.sync() == 0 and services.learning.learner.updates == updates + 1
    with pytest.raises(UserError, match=r"'s' already ended \(success at "):  # ended now
        await services.agent.end_session("s", "success")
    await feedback.aclose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, url: str) -> tuple[str, str]:
    """A database and a namespace of its own in it: the SQLite file, or the test PostgreSQL server."""
    if request.param == "sqlite":
        return url, "default"
    return request.getfixturevalue("pg_url"), f"test-{uuid.uuid4().hex[:8]}"


async def test_an_end_recorded_though_the_database_reported_an_error_is_ended_by_its_retry(
    store: tuple[str, str],
) -> None:
    """The episode was committed and the error came after (the connection lost, a timeout fired after the
    write landed): the retry, with the same episode id, finds it recorded instead of failing on the id."""
    url, namespace = store
    feedback, services = await service(url, policy="ucb", namespace=namespace)
    for tool in ("git__git_status", "git__git_log"):
        proxied(services, "s", tool)
    await services.learning.drain()
    updates = services.learning.learner.updates
    record = feedback.log.record_episode
    lost = [StoreUnavailableError("the connection to the database was lost after the commit")]

    async def committed_then_lost(episode: Episode) -> Episode:
        recorded = await record(episode)
        if lost:
            raise lost.pop()
        return recorded

    feedback.log.record_episode = committed_then_lost  # type: ignore[method-assign]  # a failing store in its place
    with pytest.raises(StoreUnavailableError):
        await services.agent.end_session("s", "success")
    ended = await services.agent.end_session("s", "success")  # the client tries again: the session is still open
    stored = await feedback.reports.get_episodes(namespace=namespace)
    assert [(e.id, e.session_id, e.tools, e.seq) for e in stored] == [
        (ended.id, "s", ["git__git_status", "git__git_log"], ended.seq)
    ]
    assert services.learning.learner.updates == updates + 1  # its end learned once, not at each try
    assert await services.sharing.sync() == 0 and services.learning.learner.updates == updates + 1
    with pytest.raises(UserError, match=r"'s' already ended \(success at "):  # ended now
        await services.agent.end_session("s", "success")
    await feedback.aclose()


async def test_a_rating_recorded_though_the_database_reported_an_error_is_counted_and_learned_once(
    store: tuple[str, str],
) -> None:
    """The rating was committed and the error came after: the client's retry of the same rating finds it
    recorded (not a second rating of the call in the tool's metrics, nor a second observation learned)."""
    url, namespace = store
    feedback, services = await service(url, namespace=namespace)
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log")
    await services.learning.drain()
    updates = services.learning.learner.updates
    add = feedback.log.add_rating
    lost = [StoreUnavailableError("the connection to the database was lost after the commit")]

    async def committed_then_lost(*args: Any, **kwargs: Any) -> RatingEvent:
        added = await add(*args, **kwargs)
        if lost:
            raise lost.pop()
        return added

    feedback.log.add_rating = committed_then_lost  # type: ignore[method-assign]  # a failing store in its place
    with pytest.raises(StoreUnavailableError):
        await services.agent.rate(session, 1, execution_id, None, "wrong file")
    await services.agent.rate(session, 1, execution_id, None, "wrong file")  # the client tries again
    [metrics] = await feedback.reports.get_tool_metrics(namespace=namespace)
    assert (metrics.ratings, metrics.avg_rating) == (1, 1.0)
    assert services.learning.learner.updates == updates + 1  # the rating learned once
    assert await services.sharing.sync() == 0 and services.learning.learner.updates == updates + 1
    await services.agent.rate(session, 1, execution_id, None, "wrong file")  # a rating again, once it worked
    [metrics] = await feedback.reports.get_tool_metrics(namespace=namespace)
    assert metrics.ratings == 2 and services.learning.learner.updates == updates + 2
    await feedback.aclose()


async def test_an_end_whose_caller_went_away_is_still_recorded_and_the_session_ended(url: str, tmp_path: Path) -> None:
    feedback, services, updates = await ended_session(url)
    record = feedback.log.record_episode

    async def caller_gone(episode: Episode) -> Episode:
        ending.cancel()  # the client gives up while the episode is being recorded
        return await record(episode)

    feedback.log.record_episode = caller_gone  # type: ignore[method-assign]  # a spy in its place
    ending = asyncio.create_task(services.agent.end_session("s", "success"))
    with pytest.raises(asyncio.CancelledError):
        await ending
    for _ in range(200):  # the end goes on without its caller
        if episodes(tmp_path):
            break
        await asyncio.sleep(0.05)
    assert episodes(tmp_path) == [("s", "success")]
    assert services.learning.learner.updates == updates + 1
    with pytest.raises(UserError, match=r"'s' already ended \(success at "):
        await services.agent.end_session("s", "success")
    await feedback.aclose()


async def test_a_second_end_of_a_session_being_ended_answers_with_the_first(url: str, tmp_path: Path) -> None:
    feedback, services, updates = await ended_session(url)
    first, second = await asyncio.gather(
        services.agent.end_session("s", "success"), services.agent.end_session("s", "success")
    )
    assert first == second and episodes(tmp_path) == [("s", "success")]
    assert services.learning.learner.updates == updates + 1
    await feedback.aclose()


async def test_calls_being_learned_when_a_snapshot_is_copied_are_learned_once_after_a_restart_from_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot's copy that waits for the lock (`LearningThread.read`: held by a sync's batch when a save
    asks, and a drain's hand-over queued meanwhile may take it first) is let in between two chunks of the
    calls being learned: the calls it holds learned are counted in it as learned live, so a restart from it
    does not learn them again from the log."""
    feedback, live = await service(url)
    learning = live.learning
    learner = learning.learner
    learn = learner.learn

    def slow_step(step: Any, rng: Any, **kwargs: Any) -> Any:
        time.sleep(0.002)  # the GIL let go: the event loop asks for the copy while the chunk is learned
        return learn(step, rng, **kwargs)

    monkeypatch.setattr(learner, "learn", slow_step)
    calls = 3 * LEARN_CHUNK  # under a seed: learned one at a time, a reader let in every LEARN_CHUNK
    for _ in range(calls):
        proxied(live, "s", "git__git_log")
    draining = asyncio.create_task(learning.drain())
    while learner.updates == 0:
        await asyncio.sleep(0.001)
    captured = await learning.thread.read(lambda: live.snapshots._captured("periodic"))  # as `save` copies it
    await draining
    assert 0 < captured.sample_count < calls  # copied between two chunks of the hand-over
    await feedback.snapshots.save(await asyncio.to_thread(live.snapshots._record, captured), keep=5)
    await feedback.flush()
    await feedback.aclose()  # a crash: that snapshot is the newest

    feedback, restarted = await service(url)
    report = await restarted.snapshots.restore_latest()
    assert restarted.learning.learner.updates == calls, report  # each call learned once
    await feedback.aclose()
