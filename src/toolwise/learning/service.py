"""Learning from calls: note each proxied call (then record and learn it), and own what was learned.
What it holds and answers between calls (the learned state, the catalogue, attribution, shields) is
`learning/core.py`'s `LearningCore`, which it extends.
What agents ask beside their calls (recommend, rate, end a session) is `learning/agent.py`'s; sharing
the log with other instances, `learning/sharing.py`'s; the snapshot lifecycle,
`learning/snapshotting.py`'s. The learned state all of them read is a `LearnedState`
(learning/learned.py) that a snapshot replaces whole through `adopt`.

Every proxied call becomes an execution record (queued for group commit) and a learner update. The
learner learns on its own thread (learning/worker.py), never on the event loop; the database never
sits on the path of a call.

What a call leaves to do (compute the reward, update the policy, queue the record) is deferred: `note` only
notes it, and `drain` does it shortly after (`IDLE_DRAIN_S`; while calls keep coming back to back, once they
pause, `QUIET_S`, within `LATEST_S` or `HAND_OVER` calls: a call served while the learning thread learns waits for
the GIL at each turn of the loop): up to `HAND_OVER` calls handed to the learning thread at once and learned there
while the event loop serves calls, a reader of the learned state let in between chunks of `LEARN_CHUNK` calls
(with learning off a chunk is only its rewards and context hashes, computed on the loop while the lock is free),
then queued for the store; and always before anything reads what was recorded (every own tool drains first, a
recommendation one run of `LEARN_RUN` at most of the calls before the newest `STALE_CALLS` of server/handlers.py,
`caught_up`; so does shutdown). A drain takes the calls noted before it was asked, those noted meanwhile are the
next drain's. Drained in call order, by one drainer at a time, so under a seed learning is the same as if each
call had been learned from on the spot.
Without a seed (the default), a drain that finds `RUNS_FROM` calls or more waiting learns each stretch of
them that follows no recommendation as one run of up to `LEARN_RUN` (`Learner.learn_many`: minibatches, as a
replay of the log learns, a run's fixed work shared by its calls), and of up to `CATCH_UP_RUN` once that many
wait (`_run_size`): less of the learning thread's Python, and so of its hold of the GIL, per call than a step
each, which is what the calls waiting on the event loop meanwhile wait for; in minibatches of `KEEP_UP_BATCH`
calls while fewer than `BEHIND` wait, so that a run learns about as much per call as a step each
(docs/benchmarks.md has both).
What the event loop reads or changes of the learned state beside the calls (a recommendation, a rating, a
session's end, the statistics, a snapshot's copy) goes through `LearningCore.read_learned`, which takes the
learning thread's `lock` at once when it is free (not for a snapshot's copy, as long as the state) and else
waits for it on a reader thread beside the loop (learning/worker.py), for the chunk or run being learned (a
recommendation, for the run's next minibatch step only: the learning thread answers it between two); so
does a catalogue the learner takes; a trace's reward is lock-free (`LearningCore.reward_of`). The shared log
(learning/sharing.py: another instance's entries, a start-up's replay) is learned on the learning thread too,
each batch learned and marked in one piece there (`LearningThread.hand_over`; a recommendation waits for a
chunk of a sync's batch, and for a minibatch step of a replay's, learned at once), and a snapshot's state is
swapped in there (`LearningCore.adopt`): the loop never runs a learning step and never blocks on the lock.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from toolwise.downstream.outcome import CallOutcome
from toolwise.feedback import (
    Execution,
    FeedbackService,
    StoreUnavailableError,
    utcnow,
)
from toolwise.feedback.arguments import redact
from toolwise.learning.core import LearningCore, learned_from
from toolwise.learning.sessions import (
    Call,
    OpenDecision,
    Session,
)
from toolwise.learning.worker import LEARN_CHUNK
from toolwise.rl import Decision, StepColumns

log = logging.getLogger(__name__)


IDLE_DRAIN_S = 0.05  # deferred work is done this long after the first call that left some, unless calls keep coming:
QUIET_S = 0.01  # then once none came for this long (a burst's calls are not slowed by its learning beside them),
LATEST_S = 0.25  # or this long after that first call, or once `HAND_OVER` calls wait, whichever comes first
RECORDS_PER_TURN = 16  # records queued from a hand-over before the event loop's calls get a turn
HAND_OVER = 64  # calls handed to the learning thread at once: a round trip between the threads for each
RUNS_FROM = 2  # calls pending from which the thread learns them as runs (`_learn_runs`), without a seed
KEEP_UP_BATCH = 2  # calls a minibatch step takes in those runs while fewer than BEHIND wait (`_minibatch`)
BEHIND = 16  # calls pending from which learning is behind: runs in the policy's own minibatches (a log replay's)
LEARN_RUN = 64  # calls a run learns at most while fewer than CATCH_UP_RUN wait: what a reader waits for then
CATCH_UP_RUN = 256  # from this many calls pending, a run learns up to this many (`_run_size`)
STORE_RETRY_S = 1.0  # a drain the database refused is tried again this much later


class LearningService(LearningCore):
    """Every proxied call noted, then learned on the learning thread and recorded (the module's docstring)."""

    def note(
        self,
        session: Session,
        *,
        tool: str,
        server: str,
        arguments: dict[str, Any] | None,
        outcome: CallOutcome,
        started_at: datetime,
        latency_ms: float,
        opened: OpenDecision | None = None,
    ) -> str:
        """Note one proxied call (session history now; record and learning at the next `drain`);
        `outcome` says how it went (`catalogue.outcome_of`); returns the execution id. A call following `opened` is
        learned with that decision's query; any other, with its session's last query and recommendation."""
        decision: Decision | None
        query: str | None
        if opened is not None:
            decision, query = session.follow(opened.decision), opened.query
        else:
            decision, query = session.follow(), session.query
        followed = decision if decision is not None and decision.chosen == tool else None
        execution = Execution(
            tool,
            server,
            session.id,
            outcome.success,
            latency_ms,
            started_at,
            utcnow(),
            arguments,
            namespace=self.namespace,
            query=query,
            previous_tool=session.previous_tool,
            position=session.length,
            decision_id=None if decision is None else decision.decision_id,
            propensity=None if followed is None else followed.propensity,
            error_type=outcome.error_type,
            error_message=outcome.error_message,
            result_size=outcome.result_size,
            instance=self.instance_id,
            explored=None if followed is None else followed.explored,
        )
        history = session.recent(session.length, self.history_n)
        failed_before = session.failed_before(session.length)
        self._pending.append(Call(execution, history, decision, session.owner, failed_before))
        self._noted += 1
        session.add(execution)
        if self._idle is None:
            loop = asyncio.get_running_loop()
            self._idle = loop.call_later(IDLE_DRAIN_S, self._drain_when_idle)
            self._seen, self._latest = self._noted, loop.time() + LATEST_S
        return execution.id

    @property
    def unmarked(self) -> int:
        """Own executions learned live whose place in the log no sync has seen yet."""
        return len(self.covered.live)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def drain(self) -> None:
        """Learn and record every call noted so far, in order: learned on the learning thread a chunk
        at a time while the event loop serves, then queued for the store. Calls noted while the learned
        state loads wait for it. The calls noted after it was asked are left to the drain after it: under
        calls that keep coming faster than they are learned, it still returns. With every call noted taken
        and no drain or restore holding the order, there is nothing to wait for: it returns at once."""
        if self._taken >= self._noted and not self._order.locked():
            return
        await self._drain_until(self._noted)

    async def caught_up(self, stale: int) -> None:
        """A recommendation's staleness bound (server/handlers.py), waiting for one short run's learning at
        most: with more than the newest `stale` calls noted so far waiting to be learned and no drain on, up to
        `LEARN_RUN` of the oldest are learned first (not a run of `CATCH_UP_RUN`: the wait is the same however
        far behind); with a drain on, nothing is waited for here (the read after it is answered at the next
        break of the run being learned, `LearningThread.answer_midway`). A backlog beyond that is the drain's,
        learned while the recommendation answers from the state as it is: waiting for it made a
        recommendation wait for every run of a backlog (hundreds of ms: docs/benchmarks.md). A drain waiting
        for the order is on too: queued behind it, the short run would wait for every call noted before that
        drain was asked (`_in_order`). The calls of a burst waiting for it to pause are learned from now on
        (`_learn_burst_now`), as without the wait."""
        self._learn_burst_now()
        end = self._noted - stale
        if self._taken < end and not self._drainers:
            await self._drain_until(min(end, self._taken + LEARN_RUN))

    async def _drain_until(self, end: int) -> None:
        """`drain` of the calls before the `end`-th noted, after the drains asked before it (one at a time)."""
        async with self._in_order():
            await self._drain_pending(end)

    @asynccontextmanager
    async def _in_order(self) -> AsyncIterator[None]:
        """`_order`, once the learned state is loaded (when calls wait), counted in `_drainers` from when it is
        asked: between one holder and the next, asyncio's lock reads free while the next waits to be woken."""
        self._drainers += 1
        try:
            if self._pending:
                await self.until_loaded()
            async with self._order:
                yield
        finally:
            self._drainers -= 1

    @asynccontextmanager
    async def holding_calls(self) -> AsyncIterator[None]:
        """`drain`, then the calls noted until the block ends wait (noted, in order) for the drain after
        it: a restore loads a state off the event loop meanwhile, and they are learned into that state."""
        end = self._noted
        async with self._in_order():
            await self._drain_pending(end)
            yield

    async def _drain_pending(self, end: int) -> None:
        """`drain`'s work, holding `_order`: the calls pending before the `end`-th noted."""
        while self._pending and self._taken < end:
            if self._learns_nothing() and self.lock.take():  # learning off: on the loop, a chunk at a time
                chunk = list(itertools.islice(self._pending, min(LEARN_CHUNK, end - self._taken)))
                try:
                    self._learn_chunk(chunk)
                finally:
                    self.lock.__exit__(None, None, None)
            else:  # learning, or the lock held elsewhere (a snapshot's copy): the thread waits for it, not the loop
                runs, minibatch = self._as_runs(), self._minibatch()
                chunk = list(itertools.islice(self._pending, min(self._run_size(runs), end - self._taken)))
                await self.thread.run(partial(self._learn_chunk, chunk, runs=runs, minibatch=minibatch))
            for i, call in enumerate(chunk):
                if i and i % RECORDS_PER_TURN == 0:  # queueing a record never waits on a free queue: the loop's
                    await asyncio.sleep(0)  # calls get a turn within a hand-over's records, not only after them
                # Taken off only once queued: a drainer cancelled with its request, or refused by a
                # failing database, leaves the call for the next drain rather than losing it.
                await self._complete(call)
                self._pending.popleft()
                self._taken += 1

    def _learns_nothing(self) -> bool:
        """With learning off (and no argument values kept, which embeds their requests) a chunk is only its
        rewards and context hashes, too little work to hand over: done on the event loop."""
        return not self.settings.learning and not self.settings.store_arguments

    def _run_size(self, runs: bool) -> int:
        """How many pending calls the next hand-over takes: up to `HAND_OVER` learned one at a time (a blocked
        reader let in every `LEARN_CHUNK`), runs of up to `LEARN_RUN` when they are learned as runs (`_as_runs`),
        and of up to `CATCH_UP_RUN` once that many wait. A run's fixed work (the n-gram counts, a run's
        arrays, its Python) is shared by more calls then (docs/benchmarks.md has the figures). The newest
        pending call waits for the backlog whatever the run's size; a rating or a snapshot's copy waits for one run
        (a recommendation, for one of its minibatch steps: `LearningThread.answer_midway`), and a run's
        n-grams count from the next run on (minibatch semantics, as a replay of the log learns in runs of 512)."""
        if not runs:
            return HAND_OVER
        return CATCH_UP_RUN if len(self._pending) >= CATCH_UP_RUN else LEARN_RUN

    def _as_runs(self) -> bool:
        """Whether the calls pending are learned as runs: more than one, and not under a seed, whose decisions
        replay exactly (how many calls wait at a drain depends on timing, and a run learns as a minibatch)."""
        return len(self._pending) >= RUNS_FROM and self.settings.seed is None and self.settings.learning

    def _minibatch(self) -> int | None:
        """Calls a minibatch step of a run takes: `KEEP_UP_BATCH` while learning keeps up (a step moves the choice
        model by its calls' mean gradient, so a run in the replay's minibatches of 32 learns less per call than a
        step each: top-1 in docs/benchmarks.md); once it is behind, the policy's own (its fixed work shared more)."""
        return None if len(self._pending) >= BEHIND else KEEP_UP_BATCH

    def _learn_chunk(self, calls: list[Call], runs: bool = False, minibatch: int | None = None) -> None:
        """On the learning thread: learn the calls not learned yet (a call is learned once, even when
        the store refuses its record and it is retried, or a cancelled drain hands it over again); with
        `runs` (`_as_runs`), as runs. Learned one at a time, a reader blocked on the lock gets in every
        `LEARN_CHUNK` calls (learned as runs, once the hand-over is learned; a recommendation between a run's steps)."""
        todo = [call for call in calls if call.execution.context_hash is None and not call.unlearnable]
        if runs and len(todo) >= RUNS_FROM:
            self._learn_runs(todo, minibatch)
        else:
            for i, call in enumerate(todo):
                self.thread.between_steps(i)
                self._learn(call)
        for call in todo:
            self._remember_arguments(call)

    def _learn_runs(self, calls: list[Call], minibatch: int | None) -> None:
        """Each stretch of plain calls is learned as one run (`Learner.learn_many`, the
        replay's vectorised minibatches: rl/batch.py), the others one at a time in their place. A plain call
        follows no recommendation (the run does not learn a passed-over or followed one) and is learned from."""
        start = 0
        for end in range(len(calls) + 1):
            if end < len(calls) and self._plain(calls[end]):
                continue
            if end - start > 1:
                self._between_steps()
                self._learn_run(calls[start:end], minibatch)
            elif end > start:
                self._between_steps()
                self._learn(calls[start])
            if end < len(calls):
                self._between_steps()
                self._learn(calls[end])
            start = end + 1

    def _between_steps(self) -> None:
        """Between two runs or steps of a hand-over learned as runs (each call learned so far marked learned): a
        recommendation asked meanwhile is answered (`LearningThread.answer_midway`), as between a run's minibatch
        steps, and the event loop gets its turn."""
        self.thread.answer_midway()
        self.thread.let_loop_run()

    def _plain(self, call: Call) -> bool:
        return call.decision is None and learned_from(call.execution.error_type)

    def _learn_run(self, calls: list[Call], minibatch: int | None) -> None:
        """`_learn` of each of `calls`, as one run; a run that fails is recorded unlearned, as a call is."""
        learner = self.learner
        try:
            steps = [call.step(self.history_n) for call in calls]
            columns, pause = StepColumns.of(steps), self.thread.answer_midway  # recommendations between steps
            rewards = learner.learn_many(columns, self.state.rng, minibatch=minibatch, pause=pause).tolist()
        except Exception:
            log.exception("learning a run of %d calls failed; the executions are recorded", len(calls))
            for call in calls:  # not learned: each record keeps what its step says, if it says anything
                self._unlearned(call)
            return
        for call, step, reward in zip(calls, steps, rewards, strict=True):
            call.execution.learned(reward, learner.context_hash(step))
            self.covered.live.add(call.execution.id)  # marked as learned in the same hold (`_learn`)

    async def _complete(self, call: Call) -> None:
        execution = call.execution
        await self.feedback.log.record_execution(call.stored(), force=self._closing)
        call.recorded()
        if (session := self.sessions.find(execution.session_id)) is not None:
            session.rewarded(execution.reward or 0.0)
        self.state.called()
        self.state.learned()
        self.shield(execution)
        if self.metrics is not None:
            self.metrics.observe_call(execution)

    def _remember_arguments(self, call: Call) -> None:
        """A successful call's redacted argument values, for suggestions: only with `store_arguments`
        (the user's consent to keep argument values), only with a request to match them to; kept for
        its client alone unless `share_arguments` (`argument_key`)."""
        e = call.execution
        if not (self.settings.store_arguments and e.success and e.arguments and e.query):
            return
        semantic = self.learner.index.semantic
        if semantic is not None:
            key = self.argument_key(call.owner, e.tool)
            self.arguments.add(key, semantic.query(e.query), redact(e.arguments, self._redact))

    def argument_key(self, owner: str | None, tool: str) -> str:
        """Where the argument memory keeps `tool`'s values for `owner`: one client's values are never
        suggested to another unless `share_arguments` says so."""
        return tool if self.settings.share_arguments or owner is None else f"{owner}\x00{tool}"

    def _learn(self, call: Call) -> None:
        """Ask the learner once: it learns the call's step and returns what the record keeps (a call
        it must not learn from, see `learned_from`, keeps its context hash and no reward)."""
        execution = call.execution
        learnable = learned_from(execution.error_type)
        try:
            step = call.step(self.history_n)
            learned = self.learner.learn(step, self.state.rng, update=self.settings.learning and learnable)
        except Exception:
            log.exception("learning from a call of %s failed; the execution is recorded", execution.tool)
            self._unlearned(call)
            return
        execution.learned(learned.reward if learnable else None, learned.context_hash)
        # Marked as learned live in the same hold of the lock: a snapshot's copy let in between two chunks
        # holds the calls learned with their marks, so a restart from it does not learn them again.
        self.covered.live.add(execution.id)

    def _unlearned(self, call: Call) -> None:
        """A call whose learning failed: recorded with the reward and context hash its step has without
        learning it. If even those fail (a malformed step), recorded without them, said once with the
        traceback, and marked learned all the same: the drain goes on, so one bad call never stops the
        calls after it from being recorded and learned (nor does a sync try it again)."""
        execution = call.execution
        try:
            learned = self.learner.learn(call.step(self.history_n), self.state.rng, update=False)
            reward, context_hash = (
                (learned.reward if learned_from(execution.error_type) else None),
                learned.context_hash,
            )
        except Exception:
            log.exception(
                "a call of %s (execution %s) could not be learned nor rewarded; recorded without reward or context",
                execution.tool,
                execution.id,
            )
            reward, context_hash = None, None
            call.unlearnable = True
        execution.learned(reward, context_hash)
        self.covered.live.add(execution.id)

    def session_closed(self, session_id: str) -> None:
        """The session's connection closed: a failure of its last call, waiting to be read from the
        session's next call (rl/hindsight.py), is learned as the session's end, on the learning thread
        after the calls noted before it. Not once closing: it waits in the learned state (its snapshot)."""
        if self._closing:
            return
        self._draining.spawn(
            self._read_waiting(session_id), name="toolwise-session-end", failure="learning a session's end failed"
        )

    async def _read_waiting(self, session_id: str) -> None:
        await self.drain()
        if self.settings.learning:
            await self.thread.run(lambda: self.learner.read_waiting(session_id, self.state.rng))

    def finish_before_close(self, work: asyncio.Future[Any], what: str) -> None:
        """`work` ends whole whether or not its caller goes away (a rating committed, a session's end: `Agent`):
        a shutdown, which cancels the requests in flight, waits for it in `aclose` (`store_timeout_s` at most:
        the database may never answer), so what it records is recorded before the feedback service closes."""
        self._unawaited[work] = what
        work.add_done_callback(self._finished_unawaited)

    def _finished_unawaited(self, work: asyncio.Future[Any]) -> None:
        self._unawaited.pop(work, None)

    def _learn_burst_now(self) -> None:
        """A read of the learned state while a burst's calls wait (`_drain_when_idle`): their learning starts now,
        so that a reader beside calls that never pause reads as fresh a state as without the wait."""
        if self._burst and self._idle is not None:
            self._idle.cancel()
            self._idle, self._burst = None, False
            self._spawn_drain()

    def _drain_when_idle(self) -> None:
        """The deferred work, once the calls pause (`QUIET_S`): the learning thread shares the GIL with the
        event loop, and a call served while it learns waits for it at every turn of the loop; the calls of a
        burst, back to back, are learned once it ends, within `LATEST_S` or `HAND_OVER` calls; calls that go on
        past that are learned beside them, as they come, until they pause (waiting again would only gather
        the same learning into larger lumps)."""
        self._idle, self._burst = None, False
        loop = asyncio.get_running_loop()
        coming = self._noted != self._seen
        if coming and not self._sustained and len(self._pending) < HAND_OVER and loop.time() < self._latest:
            self._seen, self._burst = self._noted, True
            self._idle = loop.call_at(min(loop.time() + QUIET_S, self._latest), self._drain_when_idle)
            return
        # calls that went on past the bound are learned beside them, every IDLE_DRAIN_S, until they pause
        self._sustained = coming
        if self._pending:
            self._spawn_drain()

    def _spawn_drain(self) -> None:
        self._draining.spawn(self._drain_or_retry(), name="toolwise-drain", failure="recording deferred calls failed")

    async def _drain_or_retry(self) -> None:
        """The idle drain; while the database refuses records the calls stay noted (not lost) and
        the drain is tried again a little later (the writer's log and health say why)."""
        try:
            await self.drain()
        except StoreUnavailableError as exc:
            log.warning("%d calls wait to be recorded: %s", len(self._pending), exc)
            if self._idle is None:
                self._idle = asyncio.get_running_loop().call_later(STORE_RETRY_S, self._drain_when_idle)

    async def aclose(self) -> None:
        """Drain what is left, and let the ratings and ends under way finish (`finish_before_close`), before the
        feedback service closes; a catalogue's embedding is not waited for."""
        await self.stop_teaching()
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._closing = True  # queue beyond the writer's bound: it commits or dead-letters them
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.store_timeout_s
        while self._unawaited:  # a rating or a session's end whose caller went away (its failure is logged)
            _, stuck = await asyncio.wait(list(self._unawaited), timeout=max(deadline - loop.time(), 0))
            if stuck:  # the database does not answer: a shutdown must not wait for it for ever
                for work in stuck:
                    log.error(
                        "shutdown: %s was not stored: the database did not answer within %g s (store_timeout_s)",
                        self._unawaited.pop(work, "work"),
                        self.settings.store_timeout_s,
                    )
                    work.cancel()
                break
        while self._pending:  # and those noted while it drained
            await self.drain()
        await self._draining.wait()
        self.thread.close()


async def with_session_query(feedback: FeedbackService, execution: Execution, namespace: str) -> Execution:
    """`execution` with the recommend_tool query that was its context: stored once, on the call that
    followed the recommendation, the session's later calls find it in the log."""
    if execution.query is not None or execution.position == 0:
        return execution
    found = await feedback.reads.session_query(execution.session_id, namespace=namespace, before_seq=execution.seq)
    return replace(execution, query=found)
