"""Learning happens beside the event loop: every learning step of a proxied call runs on the learning
thread, in call order, and what it learned is what the recommendations after it read."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.server.surface import held_elsewhere, ok, rows, running
from tests.server.test_persistence import TOOLS, proxied
from tests.server.test_persistence import service as open_services
from toolwise.learning import service
from toolwise.learning.worker import LEARN_CHUNK
from toolwise.rl import Learner, Step
from toolwise.server.app import Toolwise
from toolwise.server.handlers import STALE_CALLS


@dataclass
class Learned:
    """What a learner was asked to learn, in order: each run's size and minibatch, each call learned alone."""

    runs: list[tuple[int, int | None]] = field(default_factory=list)
    ones: list[str] = field(default_factory=list)

    @property
    def run_sizes(self) -> list[int]:
        return [size for size, _ in self.runs]


def spy_on(learner: Any, monkeypatch: pytest.MonkeyPatch) -> Learned:
    """The learner's `learn_many` and `learn`, noted (`Learned`) and then done as before."""
    seen = Learned()
    learn_many, learn = learner.learn_many, learner.learn

    def run_spy(steps: Any, *args: Any, **kwargs: Any) -> Any:
        seen.runs.append((len(steps), kwargs.get("minibatch")))
        return learn_many(steps, *args, **kwargs)

    def one_spy(step: Step, *args: Any, **kwargs: Any) -> Any:
        seen.ones.append(step.tool)
        return learn(step, *args, **kwargs)

    monkeypatch.setattr(learner, "learn_many", run_spy)
    monkeypatch.setattr(learner, "learn", one_spy)
    return seen


async def caught_up(app: Toolwise) -> None:
    """Until the start-up has loaded the learned state and caught up with the log (its own drain included)."""
    while app.learning.loading or app.learning.catching_up:
        await asyncio.sleep(0.01)


async def test_proxied_calls_are_learned_on_the_learning_thread_in_call_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as (app, client):
        learner = app.learning.learner
        learn = learner.learn
        seen: list[tuple[str, int]] = []

        def spy(step: Step, *args: Any, **kwargs: Any) -> Any:
            seen.append((str((step.query, step.position)), threading.get_ident()))
            return learn(step, *args, **kwargs)

        monkeypatch.setattr(learner, "learn", spy)
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        for i in range(10):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        await app.learning.drain()
        loop_thread = threading.get_ident()
        assert len(seen) == 10
        assert all(thread != loop_thread for _, thread in seen), "no learning step ran on the event loop"
        assert [position for position, _ in seen] == [str(("say hello back", i)) for i in range(10)]
        stats = ok(await client.call_tool("get_learning_stats", {}))
        assert stats["updates"] == 10 and stats["calls"] == 10


async def test_a_recommendation_reads_the_learned_state_as_it_is_unless_a_seed_asks_for_exact_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # nothing is learned until someone waits for it
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)  # start-up's catch-up ends with a drain of its own
        assert not (await client.call_tool("toy__echo", {"text": "hello"})).is_error
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        assert app.learning.pending == 1, "the recommendation did not wait for the call before it"
        for i in range(STALE_CALLS + 10):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        ok(await client.call_tool("recommend_next_tools", {}))
        # past STALE_CALLS pending calls, a recommendation waits for the older ones, not for every one
        assert app.learning.pending == STALE_CALLS
    async with running(tmp_path / "seeded") as (app, client):  # surface.running's seed: decisions replay exactly
        await caught_up(app)
        assert not (await client.call_tool("toy__echo", {"text": "hello"})).is_error
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        assert app.learning.pending == 0


async def test_calls_queued_behind_learning_are_learned_as_runs_each_record_keeping_its_reward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        seen = spy_on(app.learning.learner, monkeypatch)
        for i in range(service.BEHIND * 3):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        assert not (await client.call_tool("toy__echo", {"text": "followed"})).is_error  # learned on its own
        await app.learning.drain()
        assert sum(seen.run_sizes) == service.BEHIND * 3 and max(seen.run_sizes) <= service.LEARN_RUN
        assert seen.ones == ["toy__echo"], "a call that follows a recommendation is learned one at a time"
        stats = ok(await client.call_tool("get_learning_stats", {}))
        assert stats["updates"] == service.BEHIND * 3 + 1
    learned = rows(tmp_path, "SELECT reward, context_hash FROM executions")
    assert len(learned) == service.BEHIND * 3 + 1
    assert all(reward is not None and reward > 0 and len(context) == 64 for reward, context in learned)


@pytest.mark.parametrize("seed", [None, 0], ids=["as-a-run", "one-at-a-time"])
async def test_two_plain_calls_waiting_without_a_seed_are_learned_as_one_run_and_under_a_seed_each_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int | None
) -> None:
    """A drain that finds more than one call waiting learns them as a run (`Learner.learn_many`: less of the
    learning thread's Python and GIL per call than one step each, so less of it lands in the calls waiting on
    the event loop); under a seed each is learned alone, as decisions replay exactly."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, seed=seed) as (app, client):
        await caught_up(app)
        seen = spy_on(app.learning.learner, monkeypatch)
        for i in range(2):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        await app.learning.drain()
        # in minibatches of KEEP_UP_BATCH: a run learns about as much per call as a step each (not the replay's 32)
        assert (seen.runs, len(seen.ones)) == (([(2, service.KEEP_UP_BATCH)], 0) if seed is None else ([], 2))
        assert ok(await client.call_tool("get_learning_stats", {}))["updates"] == 2


async def test_a_deep_backlog_is_learned_in_longer_runs_and_what_is_left_of_it_in_short_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once `CATCH_UP_RUN` calls wait, a run takes that many (its fixed work shared by more calls); fewer
    waiting, runs of `LEARN_RUN` as before (sizes made small here: the rule, not the constants)."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    monkeypatch.setattr(service, "LEARN_RUN", service.BEHIND)
    monkeypatch.setattr(service, "CATCH_UP_RUN", 2 * service.BEHIND)
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        seen = spy_on(app.learning.learner, monkeypatch)
        for i in range(service.BEHIND * 3):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        await app.learning.drain()
        # 3 short runs' worth waiting: one long run, then the rest (still behind: not a call at a time) as a short one
        assert seen.run_sizes == [2 * service.BEHIND, service.BEHIND]
        assert ok(await client.call_tool("get_learning_stats", {}))["updates"] == service.BEHIND * 3


async def test_a_recommendation_finding_a_deep_backlog_and_no_drain_waits_for_one_short_run_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more than STALE_CALLS calls pending and no drain under way, a recommendation has the oldest learned
    first: a run of `LEARN_RUN` at most, however deep the backlog (a run of `CATCH_UP_RUN` is a drain's), and
    the drain learns the rest (sizes made small here: the rule, not the constants)."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the recommendation
    monkeypatch.setattr(service, "LEARN_RUN", service.BEHIND)
    monkeypatch.setattr(service, "CATCH_UP_RUN", 2 * service.BEHIND)
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        seen = spy_on(app.learning.learner, monkeypatch)
        backlog = STALE_CALLS + 3 * service.BEHIND
        for i in range(backlog):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        assert seen.run_sizes == [service.BEHIND] and app.learning.pending == backlog - service.BEHIND


async def test_a_recommendation_finding_a_drain_queued_behind_another_does_not_wait_for_its_backlog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Drains queue for the order one behind another (the idle drain asks for one every IDLE_DRAIN_S), and between
    one holder and the next the order reads free: a recommendation finding more than STALE_CALLS calls pending
    then must not queue its own short run behind the drain asked before it, which learns every call noted before
    it was asked: a drain waiting for the order is under way too, and nothing is waited for."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drains below
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        learning, order = app.learning, []
        learn_many = learning.learner.learn_many

        def held_run(*args: Any, **kwargs: Any) -> Any:
            deadline = time.monotonic() + 5  # until the recommendation's bound is through (5 s at most)
            while "caught up" not in order and time.monotonic() < deadline:
                time.sleep(0.001)
            order.append("a run learned")
            return learn_many(*args, **kwargs)

        monkeypatch.setattr(learning.learner, "learn_many", held_run)
        async with learning.holding_calls():  # the order held, as a restore or a drain holds it
            for i in range(STALE_CALLS + 2 * service.LEARN_RUN):
                assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
            draining = asyncio.create_task(learning.drain())  # asked meanwhile: it waits for the order
            for _ in range(3):  # its task runs until it waits for the order (one turn of the loop)
                await asyncio.sleep(0)
            recommending = asyncio.create_task(learning.caught_up(STALE_CALLS))  # runs before the drain wakes
        await recommending
        order.append("caught up")
        await draining
        assert order[0] == "caught up", "the recommendation waited for the drain queued before it"
        assert learning.pending == 0


async def test_the_event_loop_runs_between_the_learning_steps_of_a_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learning thread gives the event loop a turn between its steps: a callback due on the loop runs in
    the middle of a chunk, not only once the chunk is learned. The switch interval is made so long that no
    other way in is left (the interpreter forcing the learning thread off the GIL after 5 ms)."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path) as (app, client):
        await caught_up(app)
        learner = app.learning.learner
        learn = learner.learn
        learned: list[str] = []

        def long_step(step: Step, rng: Any, **kwargs: Any) -> Any:
            done = learn(step, rng, update=False)  # its reward and hash: no numpy, which would drop the GIL
            until = time.perf_counter() + 0.005  # a step of pure Python, holding the GIL throughout
            while time.perf_counter() < until:
                continue
            learned.append(step.tool)
            return done

        monkeypatch.setattr(learner, "learn", long_step)
        calls = 4 * LEARN_CHUNK
        for i in range(calls):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        seen: list[int] = []

        async def watch() -> None:
            while True:
                await asyncio.sleep(0.001)
                seen.append(len(learned))

        switch = sys.getswitchinterval()
        sys.setswitchinterval(60.0)
        watching = asyncio.create_task(watch())
        try:
            await app.learning.drain()
        finally:
            sys.setswitchinterval(switch)
            watching.cancel()
        assert len(learned) == calls
        inside = [n for n in seen if n % LEARN_CHUNK and n < calls]
        assert inside, f"the event loop ran only between chunks of learning (it saw {seen} calls learned)"


async def test_a_drain_hands_the_calls_pending_to_the_learning_thread_at_once_and_a_reader_waits_for_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hand-over is a round trip between the threads: the calls pending go over together (under a seed
    too, learned one at a time in call order), and a reader of the learned state (a recommendation, the
    stats) blocked on its lock meanwhile gets in after a chunk of `LEARN_CHUNK` calls, not after them all."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path) as (app, client):  # surface.running's seed: one call at a time, never runs
        await caught_up(app)
        learner = app.learning.learner
        learn, run = learner.learn, app.learning.thread.run
        learned: list[str] = []
        handed: list[object] = []

        def slow_step(step: Step, rng: Any, **kwargs: Any) -> Any:
            time.sleep(0.005)  # a step that takes a while (the GIL let go: the loop runs meanwhile)
            learned.append(step.tool)
            return learn(step, rng, **kwargs)

        async def counted(work: Any) -> Any:
            handed.append(work)
            return await run(work)

        monkeypatch.setattr(learner, "learn", slow_step)
        monkeypatch.setattr(app.learning.thread, "run", counted)
        calls = 4 * LEARN_CHUNK
        for i in range(calls):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        draining = asyncio.create_task(app.learning.drain())
        while not learned:
            await asyncio.sleep(0.001)
        with app.learning.lock:  # a reader blocks here (the event loop, standing in for the reader thread)
            read_at = len(learned)
        await draining
        assert len(handed) == 1, f"{calls} calls pending were handed over {len(handed)} times"
        assert learned == ["toy__echo"] * calls and app.learning.learner.updates == calls
        assert read_at < calls and read_at % LEARN_CHUNK == 0, f"the reader got in after {read_at} calls"


async def test_a_drain_gives_the_event_loop_back_every_few_records_of_a_hand_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Queueing a record never waits while the queue has room, so the records of calls handed over together
    would hold the event loop (and every call waiting on it) until the last: it runs every few records."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path) as (app, client):
        await caught_up(app)
        calls = 3 * service.RECORDS_PER_TURN
        for i in range(calls):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        seen: list[int] = []

        async def watch() -> None:
            while True:
                seen.append(app.learning.pending)
                await asyncio.sleep(0)

        watching = asyncio.create_task(watch())
        await asyncio.sleep(0)
        await app.learning.drain()
        watching.cancel()
        assert app.learning.pending == 0
        assert [n for n in seen if 0 < n < calls], f"the loop ran only before and after the drain (pending: {seen})"


@pytest.mark.parametrize("learning", [True, False], ids=["learning", "learning off"])
async def test_the_stats_heartbeat_and_gauges_wait_for_the_lock_beside_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, learning: bool
) -> None:
    """While the learning thread holds the learned state's lock for a run of calls, the heartbeat, the
    gauges of /metrics and get_learning_stats wait for it without blocking the event loop (other tasks and
    proxied calls go on), and answer once it is free. With learning off too, and the last heartbeat of a
    shutdown (the learning thread closed by then) still reports."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the call made meanwhile waits to be learned
    async with running(tmp_path, learning=learning) as (app, client):
        await app.learning.until_loaded()
        while app.learning.catching_up:
            await asyncio.sleep(0.01)
        assert not (await client.call_tool("toy__echo", {"text": "hello"})).is_error
        await app.learning.drain()
        with held_elsewhere(app.learning.lock) as let_go:
            status = asyncio.create_task(app.upkeep.status())
            heartbeat = asyncio.create_task(app.upkeep.heartbeat())
            scraped = asyncio.create_task(app.metrics.render())
            stats = asyncio.create_task(client.call_tool("get_learning_stats", {}))
            for _ in range(5):  # another task on the loop goes on running
                await asyncio.sleep(0.01)
            assert not (await client.call_tool("toy__echo", {"text": "meanwhile"})).is_error
            assert not let_go.is_set(), "the event loop blocked on the learned state's lock"
            assert not (status.done() or heartbeat.done() or scraped.done() or stats.done())
        reported = await asyncio.wait_for(status, 30)
        await asyncio.wait_for(heartbeat, 30)
        assert b"toolwise_learner_updates" in await asyncio.wait_for(scraped, 30)
        answered = ok(await asyncio.wait_for(stats, 30))
        assert answered["calls"] == 2 and reported["store"] == "ok"
        assert answered["updates"] == reported["updates"] == (1 if learning else 0)
    (stopped,) = rows(tmp_path, "SELECT stopped_at FROM instances")
    assert stopped[0] is not None, "the shutdown's last heartbeat was not written"


async def _recommended_after_one_call(
    app: Any, client: Any, held: bool
) -> tuple[dict[str, Any], dict[str, Any], list[tuple[Any, ...]]]:
    """recommend_tool and recommend_next_tools after a call learned, asked with the learned state's lock free
    or `held` by another thread (as the learning thread holds it for a run of calls) until both wait for it;
    with it held, another task and a proxied call are served meanwhile. Returns both answers and what the
    event loop saw done while they waited."""
    await app.learning.until_loaded()
    while app.learning.catching_up:
        await asyncio.sleep(0.01)
    assert not (await client.call_tool("toy__echo", {"text": "hello"})).is_error
    await app.learning.drain()
    if not held:
        return (
            ok(await client.call_tool("recommend_tool", {"query": "say hello back"})),
            ok(await client.call_tool("recommend_next_tools", {})),
            [],
        )
    seen: list[tuple[Any, ...]] = []
    asked: list[object] = []
    read = app.learning.read_learned

    async def counted(work: Any, **how: Any) -> Any:
        asked.append(work)
        return await read(work, **how)

    app.learning.read_learned = counted
    with held_elsewhere(app.learning.lock) as let_go:
        recommended = asyncio.create_task(client.call_tool("recommend_tool", {"query": "say hello back"}))
        following = asyncio.create_task(client.call_tool("recommend_next_tools", {}))
        while len(asked) < 2:  # both wait for the lock (on the code before, the event loop blocked on it)
            await asyncio.sleep(0.001)
        for _ in range(5):  # another task on the loop goes on running
            await asyncio.sleep(0.01)
            seen.append(("tick",))
        meanwhile = await client.call_tool("toy__echo", {"text": "meanwhile"})
        seen.append(("proxied", meanwhile.is_error, let_go.is_set(), recommended.done() or following.done()))
    return ok(await asyncio.wait_for(recommended, 30)), ok(await asyncio.wait_for(following, 30)), seen


async def test_a_recommendation_waits_for_the_lock_beside_the_event_loop_and_answers_as_it_would_have(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the learning thread holds the learned state's lock, recommend_tool and recommend_next_tools
    wait for it without blocking the event loop: other tasks and a proxied call are served meanwhile. Once
    it is free they answer what they answer with it free (the same seed: the same decision, its id drawn
    from the learned state's rng), and the decision is open: the next call of its tool follows it."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the call made meanwhile waits to be learned
    async with running(tmp_path / "free") as (app, client):
        free, free_next, _ = await _recommended_after_one_call(app, client, held=False)
    async with running(tmp_path) as (app, client):
        answer, after, seen = await _recommended_after_one_call(app, client, held=True)
        assert seen == [("tick",)] * 5 + [("proxied", False, False, False)], "the event loop blocked on the lock"
        for answered in (answer, after, free, free_next):
            answered.pop("session_id")  # the connection's: each server's own
        assert answer == free and answer["recommendations"][0]["tool"] == "toy__echo"
        rewarded = [nexts["recommendations"][0].pop("mean_reward") for nexts in (free_next, after)]
        assert after == free_next and after["recent_tools"] == ["toy__echo"]
        assert not (await client.call_tool("toy__echo", {"text": "after"})).is_error
        await app.learning.drain()
    followed = rows(tmp_path, "SELECT decision_id FROM executions ORDER BY seq")
    assert [d for (d,) in followed] == [None, None, answer["decision_id"]]
    # The reward of the call learned, each server's own (its latency differs from run to run, and under load).
    learned = [rows(path, "SELECT reward FROM executions ORDER BY seq")[0][0] for path in (tmp_path / "free", tmp_path)]
    assert rewarded == pytest.approx(learned, abs=1e-9) and 9.0 < min(learned) <= 10.0, (rewarded, learned)


@pytest.mark.parametrize("when", ["waiting for the lock", "being decided"])
async def test_a_recommendation_whose_caller_went_away_opens_no_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A recommendation cancelled while it waits for the learned state's lock decides nothing; one cancelled
    while it is decided beside the event loop is decided, and dropped: either way no decision is left open
    for the session's calls to be attributed to, and the recommendations after it answer."""
    async with running(tmp_path) as (app, client):
        await app.learning.until_loaded()
        while app.learning.catching_up:
            await asyncio.sleep(0.01)
        learner = app.learning.learner
        recommend = learner.recommend
        deciding, decide = threading.Event(), threading.Event()

        def held_decision(query: str, *args: Any, **kwargs: Any) -> Any:
            if query == "say hello back":  # the one cancelled
                deciding.set()
                decide.wait(30)
            return recommend(query, *args, **kwargs)

        monkeypatch.setattr(learner, "recommend", held_decision)
        session = app.learning.sessions.get("gone")
        with held_elsewhere(app.learning.lock):
            asking = asyncio.create_task(app.services.agent.recommend(session, "say hello back", 3, None))
            while not app.learning.lock.waiting:
                await asyncio.sleep(0.001)
            if when == "waiting for the lock":
                asking.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await asking  # the lock held until the cancel has reached the read
        while not deciding.is_set() and when == "being decided":
            await asyncio.sleep(0.001)
        asking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asking
        decide.set()
        assert ok(await client.call_tool("recommend_tool", {"query": "echo my words"}))["recommendations"]
        assert deciding.is_set() == (when == "being decided")
        assert session.decision is None and len(app.learning.open_decisions) == 1  # recommend_tool's alone


async def test_a_drain_returns_once_the_calls_noted_before_it_are_learned_though_calls_keep_coming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls made while a drain learns are left to the drain after it: under calls that keep coming faster
    than they are learned, a drain (and the own tool waiting for it) still returns."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path) as (app, client):
        await caught_up(app)
        learner = app.learning.learner
        learn = learner.learn

        def slow_step(step: Step, rng: Any, **kwargs: Any) -> Any:
            time.sleep(0.05)  # a step that takes a while (the GIL let go: the loop serves calls meanwhile)
            return learn(step, rng, **kwargs)

        monkeypatch.setattr(learner, "learn", slow_step)
        for i in range(4):
            assert not (await client.call_tool("toy__echo", {"text": f"before {i}"})).is_error
        draining = asyncio.create_task(app.learning.drain())
        for i in range(4):  # made while the first four are learned (200 ms)
            assert not (await client.call_tool("toy__echo", {"text": f"meanwhile {i}"})).is_error
        assert not draining.done()
        await draining
        assert app.learning.pending == 4 and app.learning.learner.updates == 4


async def test_a_recommendation_while_a_drain_learns_a_backlog_waits_for_the_run_being_learned_not_the_backlog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain is learning a backlog run by run: a recommendation that finds more than STALE_CALLS calls pending
    waits for the run being learned (it holds the lock), not for the runs after it, so its wait is one run's
    learning whatever the backlog; the drain learns the rest while it answers."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        learner = app.learning.learner
        learn_many = learner.learn_many
        runs, learning = threading.Semaphore(0), threading.Event()  # each run waits for a token (10 s at most)

        def held_run(steps: Any, *args: Any, **kwargs: Any) -> Any:
            learning.set()
            runs.acquire(timeout=10)
            return learn_many(steps, *args, **kwargs)

        monkeypatch.setattr(learner, "learn_many", held_run)
        backlog = 2 * service.LEARN_RUN + STALE_CALLS + 8  # learned as runs of LEARN_RUN
        for i in range(backlog):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        draining = asyncio.create_task(app.learning.drain())
        await asyncio.to_thread(learning.wait, 10)  # the first run is being learned, holding the lock
        recommending = asyncio.create_task(client.call_tool("recommend_next_tools", {}))
        while not app.learning.lock.waiting and not recommending.done():  # until its read waits for the lock
            await asyncio.sleep(0.001)
        runs.release()  # the first run only
        ok(await recommending)
        assert learner.updates <= service.LEARN_RUN, f"{learner.updates} calls learned once it answered"
        for _ in range(backlog):
            runs.release()
        await draining
        assert app.learning.pending == 0 and learner.updates == backlog


@dataclass
class HeldRun:
    """A run of the choice model held after its first minibatch step (`held_after_first_minibatch`): `midway` is
    set once that step is learned, and the run goes on once `go` is set (10 s at most); `order` notes the
    events of the test and of the run (its second step) as they come."""

    midway: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)
    order: list[str] = field(default_factory=list)


def held_after_first_minibatch(learner: Learner, monkeypatch: pytest.MonkeyPatch, *, until: str) -> HeldRun:
    """`learner`'s choice model's minibatch steps, the first held (`HeldRun`); the second waits for `until` to be
    noted in `order` (5 s at most), then notes itself: the run's end comes after it."""
    held = HeldRun()
    choice = learner.policy.choice  # type: ignore[attr-defined]
    learn_calls = choice.learn_calls

    def step(*args: Any, **kwargs: Any) -> Any:
        done = learn_calls(*args, **kwargs)
        if not held.midway.is_set():
            held.midway.set()
            held.go.wait(10)
        else:
            deadline = time.monotonic() + 5
            while until not in held.order and time.monotonic() < deadline:
                time.sleep(0.001)
            held.order.append("the run's next step")
        return done

    monkeypatch.setattr(choice, "learn_calls", step)
    return held


@pytest.mark.parametrize(
    ("tool", "arguments"), [("recommend_tool", {"query": "say hello back"}), ("recommend_next_tools", {})]
)
async def test_a_recommendation_asked_while_a_long_run_is_learned_answers_before_the_run_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tool: str, arguments: dict[str, Any]
) -> None:
    """Learning behind learns a run of calls in minibatch steps: a recommendation asked meanwhile is answered
    by the learning thread between two steps (it reads the model part-learned, as fresh as it is), not once
    the whole run is learned; the run then goes on and every call is learned once."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        held = held_after_first_minibatch(app.learning.learner, monkeypatch, until="answered")
        calls = service.BEHIND + 24  # one run, in the policy's own minibatches (32 calls): two steps
        for i in range(calls):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        draining = asyncio.create_task(app.learning.drain())
        await asyncio.to_thread(held.midway.wait, 10)
        recommending = asyncio.create_task(client.call_tool(tool, arguments))
        while not app.learning.lock.waiting and not recommending.done():  # until its read waits for the lock
            await asyncio.sleep(0.001)
        held.go.set()
        ok(await recommending)
        held.order.append("answered")
        await draining
        assert held.order == ["answered", "the run's next step"], "the recommendation waited for the whole run"
        assert app.learning.pending == 0 and app.learning.learner.updates == calls
    assert len(rows(tmp_path, "SELECT reward FROM executions WHERE reward IS NOT NULL")) == calls


async def test_a_recommendation_asked_while_calls_that_followed_decisions_are_learned_answers_between_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Learning behind, a call that followed a recommendation is learned alone in its place among the runs: a
    recommendation asked meanwhile is answered between two such steps, not once the whole hand-over is learned."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        calls = 6
        for i in range(calls):  # each call follows the recommendation before it: none is plain
            ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        learner = app.learning.learner
        learn, midway, go, order = learner.learn, threading.Event(), threading.Event(), list[str]()

        def held_step(*args: Any, **kwargs: Any) -> Any:
            done = learn(*args, **kwargs)
            if not midway.is_set():
                midway.set()
                go.wait(10)
            else:
                deadline = time.monotonic() + 5
                while "answered" not in order and time.monotonic() < deadline:
                    time.sleep(0.001)
                order.append("a step")
            return done

        monkeypatch.setattr(learner, "learn", held_step)
        draining = asyncio.create_task(app.learning.drain())
        await asyncio.to_thread(midway.wait, 10)
        recommending = asyncio.create_task(client.call_tool("recommend_tool", {"query": "say hello again"}))
        while not app.learning.lock.waiting and not recommending.done():  # until its read waits for the lock
            await asyncio.sleep(0.001)
        go.set()
        ok(await recommending)
        order.append("answered")
        await draining
        assert order[0] == "answered", "the recommendation waited for the whole hand-over"
        assert order.count("a step") == calls - 1 and app.learning.pending == 0 and learner.updates == calls


async def test_a_copy_of_the_state_asked_while_a_run_is_learned_waits_for_its_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What copies the learned state (a snapshot's copy) never gets in between a run's steps: its calls are marked
    learned only at its end, so a snapshot taken mid-run would learn them again on restore. The copy sees the run
    whole: every call counted, learned by the choice model and marked learned."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        held = held_after_first_minibatch(app.learning.learner, monkeypatch, until="never")
        calls = service.BEHIND + 24
        for i in range(calls):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        draining = asyncio.create_task(app.learning.drain())
        await asyncio.to_thread(held.midway.wait, 10)
        learning, choice = app.learning, app.learning.learner.policy.choice  # type: ignore[attr-defined]
        copying = asyncio.create_task(
            learning.thread.read(
                lambda: (learning.learner.updates, choice.observed, len(learning.covered.live)), beside=True
            )
        )
        while not learning.lock.waiting:  # the copy waits for the lock
            await asyncio.sleep(0.001)
        held.go.set()
        copied = await copying
        await draining
        assert held.order == ["the run's next step"] and copied == (calls, calls, calls)


async def test_a_recommendation_whose_session_ended_while_it_waited_for_the_lock_opens_no_decision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recommendation waits for the lock beside the loop; a session ended meanwhile (its episode recorded,
    its open decisions forgotten) gets no decision opened after its end, so a call of a recommended tool on
    the connection after the end is not attributed to the ended session, re-created for it."""
    feedback, services = await open_services(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    learning, agent = services.learning, services.agent
    session = learning.sessions.get("s")
    proxied(services, "s", "git__git_log")
    await learning.drain()
    record, recorded = feedback.log.record_episode, asyncio.Event()

    async def held_record(episode: Any) -> Any:
        await recorded.wait()  # the end is learned; its episode is being recorded
        return await record(episode)

    monkeypatch.setattr(feedback.log, "record_episode", held_record)
    ending = asyncio.create_task(agent.end_session("s", "success"))
    while not learning.covered.live - {e.id for e in session.calls}:  # its end learned (marked live)
        await asyncio.sleep(0.001)
    with held_elsewhere(learning.lock) as let_go:  # as a sync's batch holds it
        recommending = asyncio.create_task(agent.recommend(session, "show the log", 3, None))
        await asyncio.sleep(0.01)
        assert not recommending.done()  # waiting beside the loop for the lock
        recorded.set()
        await ending  # the session ended: recorded, its decisions forgotten
    await recommending
    assert let_go.is_set()
    assert learning.sessions.find("s") is None
    after, opened = learning.attribute("git__git_log", None, "s", "s")
    assert opened is None and learning.sessions.find("s") is after  # a new session of that name, no decision
    await feedback.aclose()


async def test_a_snapshot_copies_the_learned_state_beside_the_event_loop_with_the_lock_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot copies the whole learned state (a year's state takes long) beside the event loop even when
    the lock is free: the loop runs its other callbacks (calls, recommendations) while the copy is taken."""
    feedback, services = await open_services(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    learning = services.learning
    proxied(services, "s", "git__git_log")
    await learning.drain()
    loop, learner = asyncio.get_running_loop(), learning.learner
    copy, ran = learner.state_dict, threading.Event()
    meanwhile: list[bool] = []

    def waiting_copy() -> Any:
        """The copy waits (2 s at most) for the loop to run a callback: on the loop it never could."""
        loop.call_soon_threadsafe(ran.set)
        meanwhile.append(ran.wait(2.0))
        return copy()

    monkeypatch.setattr(learner, "state_dict", waiting_copy)
    saved = await services.snapshots.save("periodic")
    assert meanwhile == [True], "the event loop ran nothing while the snapshot copied the learned state"
    assert saved.sample_count == 1
    await feedback.aclose()


async def test_with_learning_off_a_drain_waits_for_the_lock_beside_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With learning off a drain computes its calls' rewards on the event loop, holding the lock; when another
    thread holds it (a snapshot's copy, a batch of the shared log) the drain waits for it beside the loop, and
    the loop serves meanwhile."""
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    async with running(tmp_path, learning=False) as (app, client):
        await caught_up(app)
        assert not (await client.call_tool("toy__echo", {"text": "hello"})).is_error
        with held_elsewhere(app.learning.lock) as let_go:
            draining = asyncio.create_task(app.learning.drain())
            await asyncio.sleep(0.05)
            assert not let_go.is_set(), "the event loop was blocked on the lock"
            assert not draining.done()
        await draining
        assert app.learning.pending == 0


async def test_a_catalogue_change_is_taken_beside_the_event_loop_with_the_lock_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learner takes a changed catalogue (its index, the name index, the vectors stacked: as long as the
    catalogue) beside the event loop even when the lock is free: the loop serves calls meanwhile."""
    feedback, services = await open_services(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    learning = services.learning
    loop, learner = asyncio.get_running_loop(), learning.learner
    take, ran = learner.set_tools, threading.Event()
    meanwhile: list[bool] = []

    def waiting_take(*args: Any, **kwargs: Any) -> Any:
        """The catalogue is taken once the loop ran a callback (2 s at most): on the loop it never could."""
        loop.call_soon_threadsafe(ran.set)
        meanwhile.append(ran.wait(2.0))
        return take(*args, **kwargs)

    monkeypatch.setattr(learner, "set_tools", waiting_take)
    await learning.set_tools(TOOLS[:2])
    assert meanwhile == [True], "the event loop ran nothing while the learner took the catalogue"
    assert [doc.name for doc in learning.tool_docs] == [t.name for t in TOOLS[:2]]
    await feedback.aclose()


async def test_a_burst_of_calls_is_learned_once_it_pauses_not_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The learning thread shares the GIL with the event loop: calls coming back to back are served with
    nothing learned beside them, and every one is learned and recorded once they pause. The idle drain's
    looks are made here by hand (`_drain_when_idle`: its timers are an hour away)."""
    for name in ("IDLE_DRAIN_S", "QUIET_S", "LATEST_S", "HAND_OVER"):
        monkeypatch.setattr(service, name, 3600)
    async with running(tmp_path) as (app, client):
        await caught_up(app)
        made = 0
        for _ in range(4):  # a look between calls of the burst: calls came since the last, it waits for a pause
            for _ in range(4):
                assert not (await client.call_tool("toy__echo", {"text": f"hello {made}"})).is_error
                made += 1
            app.learning._drain_when_idle()
            assert app.learning.pending == made, "calls of the burst were learned beside it"
        app.learning._drain_when_idle()  # none came since the last look: the burst paused
        async with asyncio.timeout(20):
            while app.learning.pending:
                await asyncio.sleep(0.01)
        await app.feedback.flush()
        assert rows(tmp_path, "SELECT count(*), count(reward) FROM executions") == [(made, made)]


async def test_a_burst_is_learned_beside_it_once_it_lasts_longer_than_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a recommendation may read stale is bounded in time too: a burst that goes on is learned as it goes."""
    monkeypatch.setattr(service, "QUIET_S", 1.0)
    monkeypatch.setattr(service, "HAND_OVER", 10_000)
    async with running(tmp_path) as (app, client):
        await caught_up(app)
        made = 0
        async with asyncio.timeout(20):
            while not made or app.learning.pending == made:
                assert not (await client.call_tool("toy__echo", {"text": f"hello {made}"})).is_error
                made += 1
        assert made > 1


async def test_a_recommendation_asked_during_a_burst_starts_its_learning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader beside calls that never pause reads a state as fresh as if the burst's calls had not waited:
    asking starts their learning (it waits for none of them, the newest STALE_CALLS being allowed)."""
    monkeypatch.setattr(service, "QUIET_S", 60.0)  # the burst goes on as far as the idle drain can tell
    monkeypatch.setattr(service, "LATEST_S", 3600.0)
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # its first look is made by hand, once the calls are in
    async with running(tmp_path, seed=None) as (app, client):
        await caught_up(app)
        for i in range(5):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        first_look = app.learning._idle
        assert first_look is not None
        first_look.cancel()
        app.learning._drain_when_idle()  # calls came since the first: it waits for the burst to pause
        assert app.learning.pending == 5 and app.learning._idle is not None
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        async with asyncio.timeout(10):
            while app.learning.pending:
                await asyncio.sleep(0.01)


async def test_calls_that_go_on_past_the_bound_are_learned_as_they_come(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Traffic that does not pause is learned beside it, as before the wait for a pause: once a burst has run
    past its bound, the idle drain no longer waits, and the calls after it are learned while they keep coming.
    The idle drain's looks are made here by hand (`_drain_when_idle`: its timers are an hour away)."""
    for name in ("IDLE_DRAIN_S", "QUIET_S", "HAND_OVER"):
        monkeypatch.setattr(service, name, 3600)
    monkeypatch.setattr(service, "LATEST_S", 0.0)  # the first burst is past its bound at the first look
    async with running(tmp_path) as (app, _):
        await caught_up(app)
        learning = app.learning

        def calls(n: int) -> None:
            for _ in range(n):
                proxied(app.services, "traffic", "toy__echo")

        async def learned() -> None:
            async with asyncio.timeout(10):
                while learning.pending:
                    await asyncio.sleep(0.01)

        calls(3)
        learning._drain_when_idle()  # calls still coming, and past the bound: learned now
        await learned()
        monkeypatch.setattr(service, "LATEST_S", 3600.0)  # a bound far off: a burst would wait for a pause
        calls(2)
        learning._drain_when_idle()  # calls still coming: the traffic went on, so they are learned as they come
        await learned()
        calls(1)
        learning._drain_when_idle()  # none came since the last look: a pause, the traffic ended
        await learned()
        calls(2)
        learning._drain_when_idle()  # a new burst waits for its pause again
        assert learning.pending == 2
