"""Learning from calls: note each proxied call (then record and learn it), and own what was learned.
What agents ask beside their calls (recommend, rate, end a session) is `learning/agent.py`'s; sharing
the log with other instances, `learning/sharing.py`'s; the snapshot lifecycle,
`learning/snapshotting.py`'s. The learned state all of them read is a `LearnedState`
(learning/learned.py) that a snapshot replaces whole through `adopt`.

Every proxied call becomes an execution record (queued for group commit) and a learner update. The
learner learns on its own thread (learning/worker.py), never on the event loop; the database never
sits on the path of a call.

What a call leaves to do (compute the reward, update the policy, queue the record) is deferred: `note`
only notes it, and `drain` does it shortly after (`IDLE_DRAIN_S`), in chunks of `LEARN_CHUNK` calls
learned on the learning thread while the event loop serves calls (with learning off a chunk is only
its rewards and context hashes, computed on the loop), and always before anything reads
what was recorded (every own tool drains first; so does shutdown). Drained in call order, by one
drainer at a time, so learning is the same as if each call had been learned from on the spot; unless
learning falls behind (`BEHIND` calls wait, no seed): then stretches of calls that follow no
recommendation are learned as runs of up to `LEARN_RUN` (`Learner.learn_many`: minibatches, as a
replay of the log learns), several times as many a second. Whatever else reads or changes the learned
state on the event loop holds the learning thread's `lock` for it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import threading
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

import mcp_types as types
import numpy as np
from numpy.typing import NDArray

from toolwise.background import Background
from toolwise.config import Settings
from toolwise.downstream.catalogue import CallCancelledError, CallOutcome, InvalidArgumentsError
from toolwise.downstream.shields import Budget, Shields
from toolwise.feedback import (
    Execution,
    FeedbackService,
    StoreUnavailableError,
    utcnow,
)
from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN, redact
from toolwise.feedback.records import new_id
from toolwise.learning.embedding import load_embedder, tool_document, tool_effect
from toolwise.learning.learned import CatchUp, LearnedState
from toolwise.learning.metrics import Metrics
from toolwise.learning.sessions import (
    DECISION_META_KEY,
    Call,
    OpenDecision,
    OpenDecisions,
    Session,
    Sessions,
    step_of,
)
from toolwise.learning.watermark import Covered
from toolwise.learning.worker import LearningThread
from toolwise.rl import Decision, Learner, LearnerConfig, RewardWeights, Step, StepColumns, ToolDoc
from toolwise.rl.arguments import ArgumentMemory
from toolwise.rl.exploration import EPSILON_MAX, ExplorationConfig
from toolwise.rl.fit import FitConfig

log = logging.getLogger(__name__)


def tool_doc(tool: types.Tool) -> ToolDoc:
    """What the learner knows of a listed tool."""
    annotations = tool.annotations
    return ToolDoc(
        tool.name,
        f"{tool.title or ''} {tool.description or ''}",
        tool_document(tool.name, tool.title, tool.description, tool.input_schema),
        tool_effect(annotations.read_only_hint, annotations.destructive_hint) if annotations else "unknown",
    )


def learned_from(error_type: str | None) -> bool:
    """Whether a call with this outcome teaches the learner. Not a cancelled one: cancelling is the
    user's choice (a stop, a client timeout, a closed window), not the tool failing. Its elapsed time is
    cut short and whether it would have worked is unknown, so learning it as a failure would steer away
    from tools users happen to stop, and its latency would skew the tool's running mean (the reward's
    speed bonus). It is recorded (success False, its real elapsed latency) with no reward; a rating of
    it is still learned, being the user's word on the tool. Live and replayed learners skip it alike."""
    return error_type != CANCELLED


CALLERS_FAULT = InvalidArgumentsError.__name__  # error type of a call the downstream refused as invalid params
CANCELLED = CallCancelledError.__name__  # error type of a call the client cancelled (or whose connection closed)
IDLE_DRAIN_S = 0.05  # deferred work is done this long after the first call that left some
LEARN_CHUNK = 4  # calls the learning thread learns in one go: what a reader of the learned state waits for at most
BEHIND = 16  # calls pending from which learning is behind: the thread learns them as runs (`_learn_runs`)
LEARN_RUN = 64  # calls a run learns at most: what a reader waits for while learning catches up
STORE_RETRY_S = 1.0  # a drain the database refused is tried again this much later


class LearningService:
    def __init__(self, settings: Settings, feedback: FeedbackService, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.feedback = feedback
        self.metrics = metrics
        self.instance_id = new_id()
        self.tool_docs: list[ToolDoc] = []
        self.embedder = load_embedder(settings.embedding)
        self.state = LearnedState(self.new_learner(), np.random.default_rng(settings.seed))
        self.progress = CatchUp()
        self.sessions = Sessions(max(settings.session_window, self.learner.config.sequence_n - 1))
        self.open_decisions = OpenDecisions()
        self.namespace = settings.namespace
        self.shields = Shields(
            Budget(
                settings.shield_failure_rate,
                settings.shield_p95_latency_ms,
                settings.shield_window,
                settings.shield_min_calls,
                settings.shield_retry_s,
            )
        )
        # argument values of successful calls, for suggestions (kept only where arguments are stored)
        self.arguments = ArgumentMemory()
        self._redact = re.compile(DEFAULT_REDACT_PATTERN, re.IGNORECASE)
        self.thread = LearningThread()
        self._pending: deque[Call] = deque()
        self._order = asyncio.Lock()  # one drainer at a time, so calls are learned in call order
        self._idle: asyncio.TimerHandle | None = None
        self._draining = Background()
        self._closing = False
        self._wanted = self.tool_docs  # the catalogue last given to `set_tools`, taken by `_teach`
        self._teaching: asyncio.Future[None] | None = None

    @property
    def learner(self) -> Learner:
        """The current learner: look it up at each use, a snapshot restore replaces it (`adopt`)."""
        return self.state.learner

    @property
    def covered(self) -> Covered:
        return self.state.covered

    @property
    def catching_up(self) -> bool:
        return self.progress.active

    @property
    def lock(self) -> threading.Lock:
        """Held to read or change the learned state on the event loop (the learning thread changes it)."""
        return self.thread.lock

    def adopt(self, state: LearnedState, *, keep_counts: bool = False) -> None:
        """Make `state` the learned state, whole (a snapshot loaded or restored); with `keep_counts`,
        the decisions and calls counted meanwhile are added to its counters."""
        with self.lock:
            replaced, self.state = self.state, state
            state.carry_over(replaced, counts=keep_counts)

    def new_learner(self) -> Learner:
        """A learner as configured, knowing the running catalogue, that has learned nothing."""
        s = self.settings
        config = LearnerConfig(
            policy=s.policy,
            reward=RewardWeights(**s.reward.model_dump()),
            replay_enabled=s.replay,
            sequences_enabled=s.sequences,
            exploration=ExplorationConfig(epsilon_min=s.epsilon_min, epsilon_max=max(s.epsilon_min, EPSILON_MAX)),
            fit=FitConfig(enabled=s.nothing_fits),
        )
        return Learner(config, self.tool_docs, self.embedder)

    @property
    def serving(self) -> str:
        """What answers recommend_tool: the policy, or the lexical baseline in shadow mode."""
        if self.loading:
            return "prior (catching up: loading the learned state from the newest snapshot)"
        progress = self.progress
        if progress.active and not progress.total:  # counting what to replay, or only a sync to do
            return "prior (catching up: reading the log after the newest snapshot)"
        if progress.active:
            return f"prior (catching up: {progress.done:,} of {progress.total:,} log entries replayed)"
        return "baseline (shadow mode)" if self.settings.shadow else self.learner.policy.name

    def begin_loading(self) -> None:
        """A server answers before its learned state is loaded: until `end_loading`, recommendations
        come from the prior and calls wait (noted, in order) to be learned into the loaded state, not
        into the empty one it replaces."""
        self.progress.begin_loading()

    def end_loading(self) -> None:
        self.progress.end_loading()

    @property
    def loading(self) -> bool:
        return self.progress.loading

    async def until_loaded(self) -> None:
        """Return once the learned state is loaded (at once outside a server's start-up)."""
        await self.progress.until_loaded()

    async def set_tools(self, tools: list[types.Tool]) -> None:
        """Teach the learner the running catalogue; returns once it knows this one (or a newer). Its new
        documents are embedded in a worker thread while the event loop serves (with `embedding: minilm`
        most of a minute at 1,000 tools); the learner then takes it whole under the lock. One task takes
        the changes in the order they came (`_teach`), so the last catalogue wins."""
        self._wanted = [tool_doc(t) for t in tools]
        if self._teaching is None or self._teaching.done():
            self._teaching = asyncio.ensure_future(self._teach())
        await asyncio.shield(self._teaching)  # a caller cancelled does not stop the catalogue being taken

    async def _teach(self) -> None:
        while self._wanted is not self.tool_docs:
            docs = self._wanted
            vectors = await self._embed_ahead(docs)
            with self.lock:
                self.learner.set_tools(docs, vectors)
                self.tool_docs = docs

    async def _embed_ahead(self, docs: list[ToolDoc]) -> dict[str, NDArray[np.float32]]:
        """The vectors of `docs`' documents: those the learner has, and the others embedded in a worker
        thread (the embedders are safe to call beside the learning thread: they keep no state a call changes)."""
        if self.embedder is None:
            return {}
        with self.lock:
            known = self.learner.index.vectors
        vectors = {doc.document: known[doc.document] for doc in docs if doc.document in known}
        missing = [d for d in dict.fromkeys(doc.document for doc in docs) if d not in known]
        if missing:
            embedded = await asyncio.to_thread(self.embedder.embed, missing)
            vectors.update(zip(missing, embedded, strict=True))
        return vectors

    def attribute(
        self, tool: str, meta: dict[str, Any] | None, connection: str, fallback: str, owner: str | None = None
    ) -> tuple[Session, OpenDecision | None]:
        """The session a proxied call of `tool` belongs to and the open decision it follows. The
        session is `fallback`: the one `_meta` names, else the conversation the connection named last
        (`Sessions.current`), whatever was recommended. The decision: the one `_meta` names, else the
        newest open one in that session that recommended `tool` (on a connection that never named a
        conversation, the newest on the connection). See learning/sessions.py. In memory only."""
        named = meta.get(DECISION_META_KEY) if meta else None
        in_conversation = fallback if fallback != connection else None  # named by _meta or by the connection
        opened = self.open_decisions.take(connection, tool, named if isinstance(named, str) else None, in_conversation)
        return self.sessions.get(opened.session_id if opened is not None else fallback, owner), opened

    def reopen(self, connection: str, opened: OpenDecision | None) -> None:
        """A call `attribute` placed has not finished (it asked its caller for input, 2026-07-28): the
        decision it follows stays open for the round that finishes it."""
        if opened is not None:
            self.open_decisions.add(connection, opened.decision, opened.session_id, opened.query)

    @property
    def history_n(self) -> int:
        """How many tools before a call the sequence model takes as its prefix (n-grams up to `sequence_n`)."""
        return self.learner.config.sequence_n - 1

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
        session.add(execution)
        if self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(IDLE_DRAIN_S, self._drain_when_idle)
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
        state loads wait for it."""
        if self._pending:
            await self.until_loaded()
        async with self._order:
            await self._drain_pending()

    @asynccontextmanager
    async def holding_calls(self) -> AsyncIterator[None]:
        """`drain`, then the calls noted until the block ends wait (noted, in order) for the drain after
        it: a restore loads a state off the event loop meanwhile, and they are learned into that state."""
        if self._pending:
            await self.until_loaded()
        async with self._order:
            await self._drain_pending()
            yield

    async def _drain_pending(self) -> None:
        """`drain`'s work, holding `_order`."""
        while self._pending:
            size = LEARN_RUN if self._behind() else LEARN_CHUNK
            chunk = list(itertools.islice(self._pending, size))
            if self._learns_nothing():
                with self.lock:
                    self._learn_chunk(chunk)
            else:
                await self.thread.run(partial(self._learn_chunk, chunk))
            for call in chunk:
                # Taken off only once queued: a drainer cancelled with its request, or refused by a
                # failing database, leaves the call for the next drain rather than losing it.
                await self._complete(call)
                self._pending.popleft()

    def _learns_nothing(self) -> bool:
        """With learning off (and no argument values kept, which embeds their requests) a chunk is only its
        rewards and context hashes, a few microseconds a call: done on the event loop, not handed over."""
        return not self.settings.learning and not self.settings.store_arguments

    def _behind(self) -> bool:
        """Whether the calls pending are many enough to learn as runs: not under a seed, whose decisions
        replay exactly (how many calls wait at a drain depends on timing, and a run learns as a minibatch)."""
        return len(self._pending) >= BEHIND and self.settings.seed is None and self.settings.learning

    def _learn_chunk(self, calls: list[Call]) -> None:
        """On the learning thread: learn the calls not learned yet (a call is learned once, even when
        the store refuses its record and it is retried, or a cancelled drain hands it over again)."""
        todo = [call for call in calls if call.execution.context_hash is None]
        if len(todo) >= BEHIND:
            self._learn_runs(todo)
        else:
            for call in todo:
                self._learn(call)
        for call in todo:
            self._remember_arguments(call)

    def _learn_runs(self, calls: list[Call]) -> None:
        """Learning is behind: each stretch of plain calls is learned as one run (`Learner.learn_many`, the
        replay's vectorised minibatches: rl/batch.py), the others one at a time in their place. A plain call
        follows no recommendation (the run does not learn a passed-over or followed one) and is learned from."""
        start = 0
        for end in range(len(calls) + 1):
            if end < len(calls) and self._plain(calls[end]):
                continue
            if end - start > 1:
                self._learn_run(calls[start:end])
            elif end > start:
                self._learn(calls[start])
            if end < len(calls):
                self._learn(calls[end])
            start = end + 1

    def _plain(self, call: Call) -> bool:
        return call.decision is None and learned_from(call.execution.error_type)

    def _learn_run(self, calls: list[Call]) -> None:
        """`_learn` of each of `calls`, as one run; a run that fails is recorded unlearned, as a call is."""
        steps = [call.step(self.history_n) for call in calls]
        learner = self.learner
        try:
            rewards = learner.learn_many(StepColumns.of(steps), self.state.rng).tolist()
        except Exception:
            log.exception("learning a run of %d calls failed; the executions are recorded", len(calls))
            rewards = [learner.reward_of(step) for step in steps]  # not learned: the record keeps what it says
        for call, step, reward in zip(calls, steps, rewards, strict=True):
            call.execution.learned(reward, learner.context_hash(step))

    async def _complete(self, call: Call) -> None:
        execution = call.execution
        await self.feedback.log.record_execution(call.stored(), force=self._closing)
        call.recorded()
        if (session := self.sessions.find(execution.session_id)) is not None:
            session.rewarded(execution.reward or 0.0)
        self.covered.live.add(execution.id)
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
        step, execution = call.step(self.history_n), call.execution
        learnable = learned_from(execution.error_type)
        try:
            learned = self.learner.learn(step, self.state.rng, update=self.settings.learning and learnable)
        except Exception:
            log.exception("learning from a call of %s failed; the execution is recorded", execution.tool)
            learned = self.learner.learn(step, self.state.rng, update=False)
        execution.learned(learned.reward if learnable else None, learned.context_hash)

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

    def _drain_when_idle(self) -> None:
        self._idle = None
        if self._pending:
            self._draining.spawn(
                self._drain_or_retry(), name="toolwise-drain", failure="recording deferred calls failed"
            )

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
        """Drain what is left (before the feedback service closes)."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        self._closing = True  # queue beyond the writer's bound: it commits or dead-letters them
        await self.drain()
        await self._draining.wait()
        self.thread.close()

    def observe(self, step: Step) -> None:
        """Learn a step of the shared log (the caller holds `lock`)."""
        if not self.settings.learning:
            return
        try:
            self.learner.learn(step, self.state.rng)
        except Exception:
            log.exception("learning from a call of %s failed; the execution is recorded", step.tool)

    def reward_of(self, execution: Execution) -> float | None:
        """The reward a noted call will be learned with, now (its tool's running mean latency as the
        calls before it left it; for a trace, before the call is learned); None for a call not learned
        from (`learned_from`)."""
        if not learned_from(execution.error_type):
            return None
        with self.lock:
            return self.learner.reward_of(step_of(execution, (), self.history_n))

    def shield(self, execution: Execution) -> None:
        """Tell the shields how the tool did, unless the failure was the caller's (invalid arguments,
        a cancel)."""
        if self.shields.active and learned_from(execution.error_type):
            self.shield_fields(
                execution.tool, execution.success, execution.latency_ms, execution.error_type, time.monotonic()
            )

    def shield_fields(self, tool: str, success: bool, latency_ms: float, error_type: str | None, now: float) -> None:
        """`shield` of a call learned from (see `learned_from`), given by its fields."""
        if error_type != CALLERS_FAULT:
            self.shields.observe(tool, success, latency_ms, now)


async def with_session_query(feedback: FeedbackService, execution: Execution, namespace: str) -> Execution:
    """`execution` with the recommend_tool query that was its context: stored once, on the call that
    followed the recommendation, the session's later calls find it in the log."""
    if execution.query is not None or execution.position == 0:
        return execution
    found = await feedback.reads.session_query(execution.session_id, namespace=namespace, before_seq=execution.seq)
    return replace(execution, query=found)
