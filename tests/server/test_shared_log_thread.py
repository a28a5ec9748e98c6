"""The shared log is learned beside the event loop: another instance's entries (a sync) and a start-up's
replay of the log are learned on the learning thread, so the loop serves while the learned state's lock
is held elsewhere, and each entry is learned once and marked, a sync cancelled meanwhile included."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.server.surface import held_elsewhere
from tests.server.test_learning_thread import held_after_first_minibatch
from tests.server.test_persistence import QUERIES, service, teach
from toolwise.feedback import FeedbackService
from toolwise.server.services import Services

TICKS = 5  # turns another task of the loop takes while the lock is held (none, on a loop blocked on it)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def _taught_by_another(url: str, policy: str) -> tuple[FeedbackService, Services, FeedbackService, Services]:
    """B, running, then A, sharing its database, teaching calls and ratings that B has not learned yet."""
    feedback_b, b = await service(url, policy=policy)
    await b.snapshots.restore_latest()
    feedback_a, a = await service(url, policy=policy)
    await a.snapshots.restore_latest()
    await teach(a, rounds=3)
    await feedback_a.flush()
    return feedback_a, a, feedback_b, b


async def _ticks_while_held(b: Services, start: Callable[[], Any]) -> tuple[asyncio.Task[Any], threading.Event]:
    """`start()` as a task while B's lock is held elsewhere; asserts that another task of the loop ran
    meanwhile and that it waited for the lock (did not end, did not block the loop on it)."""
    with held_elsewhere(b.learning.lock) as let_go:
        task = asyncio.ensure_future(start())
        for _ in range(TICKS):
            await asyncio.sleep(0.01)
        assert not let_go.is_set(), "the event loop blocked on the learned state's lock"
        assert not task.done(), "learned with the lock held elsewhere"
    return task, let_go


def _all_marked(b: Services, log_end: int) -> bool:
    mark = b.learning.covered.executions
    return not any(mark.fresh(seq) for seq in range(1, log_end + 1))


async def _sync_cancelled_while_its_batch_waits(b: Services, *, again: bool = False) -> asyncio.Future[int] | None:
    """A sync of B cancelled (as the upkeep is at shutdown) once its first batch waits for the learning
    thread, the lock held elsewhere; with `again`, a second sync started then, returned once its batch (the
    same) waits too. Returns with the lock free."""
    handed: list[object] = []
    hand_over = b.learning.thread.hand_over

    async def spied(*args: Any) -> Any:
        handed.append(args)
        return await hand_over(*args)

    async def handed_over(count: int) -> None:
        for _ in range(100):
            if len(handed) >= count:
                return
            await asyncio.sleep(0.01)

    b.learning.thread.hand_over = spied  # type: ignore[method-assign,assignment]  # a spy that says when a batch waits
    with held_elsewhere(b.learning.lock) as let_go:
        syncing = asyncio.ensure_future(b.sharing.sync())
        await handed_over(1)
        assert handed and not let_go.is_set(), "the batch was not handed to the learning thread"
        syncing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await syncing
        resynced = asyncio.ensure_future(b.sharing.sync()) if again else None
        await handed_over(2 if again else 1)
        assert b.learning.learner.updates == 0  # not learned yet: the lock is held
    return resynced


@pytest.mark.parametrize("policy", ["outcome", "ucb"])  # ucb: a TD policy, its episode ends learned with its steps
async def test_a_sync_of_another_instances_entries_waits_for_the_lock_beside_the_event_loop(
    url: str, policy: str
) -> None:
    """While the learning thread's lock is held elsewhere, a sync of another instance's executions and
    ratings does not block the event loop; once it is free, each is learned once and marked."""
    feedback_a, a, feedback_b, b = await _taught_by_another(url, policy)
    log_end = (await feedback_b.reads.heads(b.learning.namespace))[0]
    syncing, _ = await _ticks_while_held(b, b.sharing.sync)
    assert await asyncio.wait_for(syncing, 30) == a.learning.learner.updates  # every execution and rating, once
    assert b.learning.learner.updates == a.learning.learner.updates and _all_marked(b, log_end)
    assert await b.sharing.sync() == 0 and b.learning.learner.updates == a.learning.learner.updates
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_a_start_up_replay_of_the_log_waits_for_the_lock_beside_the_event_loop(url: str) -> None:
    """A start-up's replay of the log (learned in batches at once) does not block the event loop while the
    lock is held elsewhere; once it is free, the log is learned once, its catch-up counted, and marked."""
    feedback_a, a = await service(url)
    await a.snapshots.restore_latest()
    await teach(a, rounds=3)
    await feedback_a.aclose()
    feedback_b, b = await service(url)
    await b.snapshots.load_latest()
    log_end = (await feedback_b.reads.heads(b.learning.namespace))[0]
    replaying, _ = await _ticks_while_held(b, b.sharing.catch_up)
    assert await asyncio.wait_for(replaying, 30) == a.learning.learner.updates
    assert b.learning.progress.done == b.learning.progress.total == log_end and not b.learning.catching_up
    assert b.learning.learner.updates == a.learning.learner.updates and _all_marked(b, log_end)
    assert b.learning.state.unsnapshotted == log_end  # counted on the loop once each batch came back
    assert await b.sharing.sync() == 0 and b.learning.learner.updates == a.learning.learner.updates
    await feedback_b.aclose()


async def test_a_recommendation_asked_while_a_replay_batch_is_learned_answers_before_the_batch_ends(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start-up's replay learns a batch of the log at once, in the choice model's minibatch steps, holding the
    lock: a recommendation asked meanwhile (from the prior, the replay not done) is answered by the learning
    thread between two steps, not once the whole batch is learned; the batch then goes on, learned once."""
    feedback_a, a = await service(url)
    await a.snapshots.restore_latest()
    await teach(a, rounds=16)  # 48 calls, one batch of the replay: two minibatch steps of 32 calls at most
    await feedback_a.aclose()
    feedback_b, b = await service(url)
    await b.snapshots.load_latest()
    log_end = (await feedback_b.reads.heads(b.learning.namespace))[0]
    held = held_after_first_minibatch(b.learning.learner, monkeypatch, until="answered")
    replaying = asyncio.create_task(b.sharing.catch_up())
    await asyncio.to_thread(held.midway.wait, 10)
    assert b.learning.catching_up
    asker = b.learning.sessions.get("asker")
    recommending = asyncio.create_task(b.agent.recommend(asker, QUERIES[0], 3, None))
    while not b.learning.lock.waiting and not recommending.done():  # until its read waits for the lock
        await asyncio.sleep(0.001)
    held.go.set()
    await asyncio.wait_for(recommending, 30)
    held.order.append("answered")
    assert await asyncio.wait_for(replaying, 30) == a.learning.learner.updates
    assert held.order == ["answered", "the run's next step"], "the recommendation waited for the whole batch"
    assert b.learning.learner.updates == a.learning.learner.updates and _all_marked(b, log_end)
    await feedback_b.aclose()


async def test_a_sync_cancelled_while_its_batch_waits_to_be_learned_leaves_it_learned_once_and_marked(
    url: str,
) -> None:
    """A sync cancelled while its batch waits for the learning thread (the upkeep cancelled at shutdown):
    the batch is still learned, once, and marked; a sync started before it was learned, which read the same
    batch as not learned yet, does not learn it again, nor does the sync after."""
    feedback_a, a, feedback_b, b = await _taught_by_another(url, "outcome")
    log_end = (await feedback_b.reads.heads(b.learning.namespace))[0]
    resynced = await _sync_cancelled_while_its_batch_waits(b, again=True)  # the next tick's, the batch unmarked
    assert resynced is not None
    executions = a.learning.learner.updates - await asyncio.wait_for(resynced, 30)  # the ratings alone
    assert executions == log_end and _all_marked(b, log_end)
    assert b.learning.learner.updates == a.learning.learner.updates  # the cancelled batch learned once
    assert b.learning.state.unsnapshotted == log_end  # and counted on the loop all the same
    assert await b.sharing.sync() == 0
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_a_sync_cancelled_by_a_shutdown_is_in_its_snapshot_and_not_learned_again_at_the_next_start(
    url: str,
) -> None:
    """A shutdown cancels the upkeep's sync while its batch waits for the learning thread: closing the
    learning service lets the batch be learned and marked before the shutdown snapshot is taken, so the
    next start loads it and replays only what the sync had not reached (the ratings), nothing twice."""
    feedback_a, a, feedback_b, b = await _taught_by_another(url, "outcome")
    log_end = (await feedback_b.reads.heads(b.learning.namespace))[0]
    await _sync_cancelled_while_its_batch_waits(b)
    await b.learning.aclose()  # as the app's shutdown: the learning thread closes once the batch is learned
    assert b.learning.learner.updates == log_end and _all_marked(b, log_end)
    await b.snapshots.save("shutdown")
    await feedback_b.aclose()
    feedback_c, c = await service(url)
    await c.snapshots.load_latest()
    assert c.learning.learner.updates == log_end  # the cancelled sync's batch, in the snapshot
    assert await c.sharing.catch_up() == a.learning.learner.updates - log_end  # the ratings alone
    assert c.learning.learner.updates == a.learning.learner.updates
    await feedback_a.aclose()
    await feedback_c.aclose()


async def test_a_restore_swapped_in_after_a_syncs_batch_stops_the_sync_and_keeps_what_it_restored(url: str) -> None:
    """A restore asked while a sync's batch waits for the learning thread: the event loop serves meanwhile;
    the batch is learned into the state it was read for (the swap is handed over after it), the sync learns
    nothing into the restored state, and the restored state counts the log as of the restore as covered."""
    feedback_b, b = await service(url)
    await b.snapshots.restore_latest()
    saved = await b.snapshots.save("manual")  # nothing learned
    feedback_a, a = await service(url)
    await a.snapshots.restore_latest()
    await teach(a, rounds=3)
    await feedback_a.flush()
    handed: list[object] = []
    hand_over = b.learning.thread.hand_over

    async def spied(*args: Any) -> Any:
        handed.append(args)
        return await hand_over(*args)

    b.learning.thread.hand_over = spied  # type: ignore[method-assign,assignment]  # a spy that says what waits
    with held_elsewhere(b.learning.lock) as let_go:
        syncing = asyncio.ensure_future(b.sharing.sync())
        while not handed:  # the sync's first batch waits for the learning thread
            await asyncio.sleep(0.01)
        restoring = asyncio.ensure_future(b.snapshots.adopt(saved, "restore"))  # its swap: after the batch
        for _ in range(TICKS):
            await asyncio.sleep(0.01)
        assert not let_go.is_set(), "the event loop blocked on the learned state's lock"
        assert not restoring.done()  # its snapshot is prepared once the lock is free (`running_vectors`)
    await asyncio.wait_for(restoring, 30)
    await asyncio.wait_for(syncing, 30)
    assert b.learning.learner.updates == 0  # the restored state: nothing of the sync learned into it
    assert await b.sharing.sync() == 0  # the log as of the restore counts as covered
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_a_reader_waits_for_a_few_of_a_syncs_ratings_not_the_whole_batch(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync learns another instance's ratings a batch (up to 1,000) at a time holding the lock: a reader (a
    recommendation, the stats) blocked meanwhile is let in after a chunk of `LEARN_CHUNK` of them, as between
    the calls of a drain, not after the whole batch."""
    feedback_a, _, feedback_b, b = await _taught_by_another(url, "outcome")
    learner = b.learning.learner
    observe = learner.observe_rating
    rated: list[int] = []

    def held_rating(*args: Any, **kwargs: Any) -> Any:
        rated.append(1)
        if len(rated) == 1:  # the batch's first rating is held until the reader below waits for the lock (10 s at most)
            deadline = time.monotonic() + 10
            while not b.learning.lock.waiting and time.monotonic() < deadline:
                time.sleep(0.001)
        return observe(*args, **kwargs)

    monkeypatch.setattr(learner, "observe_rating", held_rating)
    syncing = asyncio.create_task(b.sharing.sync())
    async with asyncio.timeout(10):
        while not rated:
            await asyncio.sleep(0.001)
    read_at = await b.learning.read_learned(lambda _: len(rated))
    await syncing
    assert len(rated) == 2 * 3  # _taught_by_another: two ratings a round, three rounds
    assert read_at < len(rated), f"the reader got in after {read_at} of {len(rated)} ratings"
    await feedback_a.aclose()
    await feedback_b.aclose()
