"""Wiring what happened (feedback) to how to learn (rl): one object per running toolwise.

Every proxied call becomes an execution record (queued for group commit) and a learner update; a
rating recomputes that execution's reward and teaches the learner again; ending a session stores
its episode. The learner runs on the event loop (it is pure and fast); the database never sits on
the path of a call.

What a call leaves to do (build the record, compute the reward, queue the record, update the policy)
is deferred: `record` only notes it, and `drain` does it shortly after (`IDLE_DRAIN_S`), in chunks
between which the event loop serves calls, and always before anything reads what was learned or
recorded (every own tool drains first; so does shutdown). Drained in call order, by one drainer at a
time, so learning is the same as if each call had been learned from on the spot. Doing it while the
next call waits for its downstream looks free but is not: the work then competes with that call for
the CPU and its caches (bench/overhead.py measured it); done together, a chunk of calls costs less
than the same calls done one by one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import mcp_types as types
import numpy as np

from toolwise.feedback import (
    OUTCOMES,
    Episode,
    Execution,
    FeedbackError,
    FeedbackService,
    InvalidOutcomeError,
    Outcome,
    StoreUnavailableError,
    utcnow,
)
from toolwise.feedback.records import LogEntry, RatingEvent, SnapshotRecord, new_id
from toolwise.rl import Decision, Learner, LearnerConfig, RewardWeights, Step, ToolDoc
from toolwise.rl.state import pack, unpack
from toolwise.server import snapshots
from toolwise.server.attribution import DECISION_META_KEY, OpenDecision, OpenDecisions
from toolwise.server.background import Background
from toolwise.server.catalogue import InvalidArgumentsError
from toolwise.server.config import Settings
from toolwise.server.embedding import load_embedder, tool_document
from toolwise.server.metrics import Metrics
from toolwise.server.sessions import SESSION_META_KEY, Call, Session, Sessions
from toolwise.server.shields import Budget, Shields
from toolwise.server.watermark import Watermark

log = logging.getLogger(__name__)


class NothingToRateError(FeedbackError):
    pass


def _log_failure(task: asyncio.Future[Any]) -> None:
    """For work that outlived its caller: its failure is logged, not lost."""
    if not task.cancelled() and task.exception() is not None:
        log.error("rating work whose caller went away failed", exc_info=task.exception())


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What a proxied call produced, as the learning side needs it."""

    success: bool
    error_type: str | None
    error_message: str | None
    result_size: int


def outcome_of(result: types.CallToolResult | None, error: BaseException | None) -> CallOutcome:
    if error is not None:
        return CallOutcome(False, type(error).__name__, str(error), 0)
    assert result is not None
    size = sum(len(block.text) for block in result.content if isinstance(block, types.TextContent))
    if result.is_error:
        message = next((b.text for b in result.content if isinstance(b, types.TextContent)), "")
        return CallOutcome(False, "ToolError", message[:2000], size)
    return CallOutcome(True, None, None, size)


CALLERS_FAULT = InvalidArgumentsError.__name__  # error type of a call the downstream refused as invalid params
IDLE_DRAIN_S = 0.05  # deferred work is done this long after the first call that left some
DRAIN_CHUNK = 64  # calls completed before the deferred drain lets the event loop serve again
STORE_RETRY_S = 1.0  # a drain the database refused is tried again this much later
_UNKNOWN: Any = object()  # a session whose query has not been looked up
REPLAY_REPORT_S = 2.0  # how often a long replay reports its progress in the log
LOGGED_SESSIONS = 10_000  # sessions of the shared log whose recent tools are remembered (n-gram history)


@dataclass(slots=True)
class _Pending:
    """A call noted by `record`, waiting for `drain`."""

    call: Call
    session_id: str
    step: Step
    server: str
    arguments: dict[str, Any] | None
    outcome: CallOutcome
    started_at: datetime
    finished_at: datetime
    decision: Decision | None


class LearningService:
    def __init__(self, settings: Settings, feedback: FeedbackService, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.feedback = feedback
        self.metrics = metrics
        self.instance_id = new_id()
        self._tools: list[ToolDoc] = []
        self.embedder = load_embedder(settings.embedding)
        self.learner = self._new_learner()
        self.rng = np.random.default_rng(settings.seed)
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
        self.sign_key = snapshots.load_private_key(settings.snapshot_sign_key) if settings.snapshot_sign_key else None
        self.verify_key = (
            snapshots.load_public_key(settings.snapshot_verify_key) if settings.snapshot_verify_key else None
        )
        self.decisions = 0
        self.calls = 0
        self.explored = 0
        self.synced = 0  # executions and ratings learned from the shared log (other instances, restarts)
        self.snapshot_id: int | None = None  # the snapshot the state was loaded from or last saved as
        self.executions_mark = Watermark()
        self.ratings_mark = Watermark()
        self._live: set[str] = set()  # own executions learned live, not yet seen in the log
        self._logged: OrderedDict[str, list[str]] = OrderedDict()  # session → tools, from the log
        self._queries: OrderedDict[str, str | None] = OrderedDict()  # session → its query, from the log
        self._pending: deque[_Pending] = deque()
        self._order = asyncio.Lock()  # one drainer at a time, so calls are learned in call order
        self._idle: asyncio.TimerHandle | None = None
        self._draining = Background()
        self._restores_seen = 0  # newest restore/rollback snapshot id already followed
        self._closing = False
        self.unsnapshotted = 0  # executions learned since the newest snapshot (snapshots by row count)
        self.catching_up = False  # replaying the log after start-up: recommendations come from the prior
        self.replay_done = self.replay_total = 0  # log entries replayed / to replay
        self._replay_reported = 0.0  # when the replay's progress was last logged (monotonic s)

    def _new_learner(self) -> Learner:
        s = self.settings
        config = LearnerConfig(
            policy=s.policy,
            reward=RewardWeights(**s.reward.model_dump()),
            replay_enabled=s.replay,
            sequences_enabled=s.sequences,
        )
        return Learner(config, self._tools, self.embedder)

    @property
    def serving(self) -> str:
        """What answers recommend_tool: the policy, or the lexical baseline in shadow mode."""
        if self.catching_up:
            return f"prior (catching up: {self.replay_done:,} of {self.replay_total:,} log entries replayed)"
        return "baseline (shadow mode)" if self.settings.shadow else self.learner.policy.name

    def set_tools(self, tools: list[types.Tool]) -> None:
        self._tools = [
            ToolDoc(
                t.name,
                f"{t.title or ''} {t.description or ''}",
                tool_document(t.name, t.title, t.description, t.input_schema),
            )
            for t in tools
        ]
        self.learner.set_tools(self._tools)

    def recommend(self, session: Session, query: str, top_k: int, candidates: list[str] | None) -> Decision:
        # An agent passes its user's message verbatim; a long one (pasted data) keeps its head, which
        # states the task, so that memory and the stored row stay bounded.
        query = query[: self.settings.max_query_chars]
        blocked = self.shields.blocked(time.monotonic())
        if candidates is not None:  # tools asked for by name are dropped only if something remains
            blocked = {} if all(c in blocked for c in candidates) else blocked
        elif len(blocked) >= len(self.learner.active):
            blocked = {}
        decision = self.learner.recommend(
            query,
            self.rng,
            previous_tool=session.previous_tool,
            session_length=session.length,
            candidates=candidates,
            top_k=top_k,
            exclude=blocked.keys(),
            baseline=self.settings.shadow or self.catching_up,
        )
        session.query, session.decision = query, decision
        self.open_decisions.add(session.connection or session.id, decision, session.id, query)
        self.decisions += 1
        self.explored += decision.explored
        return decision

    def attribute(
        self, tool: str, meta: dict[str, Any] | None, connection: str, fallback: str
    ) -> tuple[Session, OpenDecision | None]:
        """The session a proxied call of `tool` belongs to and the open decision it follows: the one
        `_meta` names, else the newest on `connection` that recommended `tool`; without one, the
        session `fallback` names (see server/attribution.py). In memory only."""
        named = meta.get(DECISION_META_KEY) if meta else None
        tagged = meta.get(SESSION_META_KEY) if meta else None
        opened = self.open_decisions.take(
            connection, tool, named if isinstance(named, str) else None, tagged if isinstance(tagged, str) else None
        )
        return self.sessions.get(opened.session_id if opened is not None else fallback), opened

    def record(
        self,
        session: Session,
        *,
        tool: str,
        server: str,
        arguments: dict[str, Any] | None,
        outcome: CallOutcome,
        started_at: datetime,
        latency_s: float,
        opened: OpenDecision | None = None,
    ) -> str:
        """Note one proxied call (session history now; record and learning at the next `drain`);
        returns the execution id. A call following `opened` is learned with that decision's query; any
        other, with its session's last query and recommendation."""
        if opened is not None:
            decision, query = opened.decision, opened.query
            if session.decision is decision:
                session.decision = None
        else:
            decision, session.decision, query = session.decision, None, session.query
        step = Step(
            tool,
            outcome.success,
            latency_s,
            query=query,
            previous_tool=session.previous_tool,
            session_length=session.length,
            history=tuple(session.tools[-2:]),
        )
        position = session.length
        call = Call(new_id(), tool, outcome.success, latency_s, None, step.query, step.previous_tool, position)
        session.add(call)
        noted = _Pending(call, session.id, step, server, arguments, outcome, started_at, utcnow(), decision)
        self._pending.append(noted)
        self.calls += 1
        if self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(IDLE_DRAIN_S, self._drain_when_idle)
        return call.execution_id

    @property
    def unmarked(self) -> int:
        """Own executions learned live whose place in the log no sync has seen yet."""
        return len(self._live)

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def drain(self, chunk: int | None = None) -> None:
        """Record and learn from every call noted so far, in order; with `chunk`, let the event loop
        run after every `chunk` calls."""
        async with self._order:
            done = 0
            while self._pending:
                # Taken off only once queued: a drainer cancelled with its request, or refused by a
                # failing database, leaves the call for the next drain rather than losing it.
                await self._complete(self._pending[0])
                self._pending.popleft()
                done += 1
                if chunk is not None and done % chunk == 0:
                    await asyncio.sleep(0)

    async def _complete(self, item: _Pending) -> None:
        step, call = item.step, item.call
        reward = self.learner.reward_of(step)
        call.reward = reward
        decision = item.decision
        followed = decision is not None and decision.chosen == step.tool
        execution = Execution(
            id=call.execution_id,
            tool=step.tool,
            server=item.server,
            session_id=item.session_id,
            success=step.success,
            latency_ms=step.latency_s * 1000,
            started_at=item.started_at,
            finished_at=item.finished_at,
            arguments=item.arguments,
            namespace=self.namespace,
            context_hash=self.learner.encode(step.query, step.previous_tool, step.session_length).hash,
            query=step.query if decision is not None else None,  # stored once: later calls share it
            previous_tool=step.previous_tool,
            position=step.session_length,
            decision_id=None if decision is None else decision.decision_id,
            propensity=decision.propensity if followed else None,  # type: ignore[union-attr]
            error_type=item.outcome.error_type,
            error_message=item.outcome.error_message,
            result_size=item.outcome.result_size,
            reward=reward,
            instance=self.instance_id,
            explored=decision.explored if followed else None,  # type: ignore[union-attr]
        )
        await self.feedback.record_execution(execution, force=self._closing)
        if (session := self.sessions.find(item.session_id)) is not None:
            session.reward_total += reward
        self._live.add(execution.id)
        self.unsnapshotted += 1
        self._observe(step, reward)
        self._shield(execution)
        if self.metrics is not None:
            self.metrics.observe_call(execution)

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
            await self.drain(DRAIN_CHUNK)
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

    def _observe(self, step: Step, reward: float | None) -> None:
        if not self.settings.learning:
            return
        try:
            self.learner.observe(step, self.rng, reward)
        except Exception:
            log.exception("learning from a call of %s failed; the execution is recorded", step.tool)

    async def rate(
        self, session: Session, rating: int, execution_id: str | None, tool: str | None, comment: str | None
    ) -> tuple[Execution, float]:
        """Store a 1..5 rating and learn from it; returns the execution and its new reward."""
        await self.drain()
        if execution_id is None:
            call = session.latest(tool)
            if call is None:
                what = f"no call of {tool!r}" if tool else "no call"
                raise NothingToRateError(
                    f"{what} in session {session.id!r} to rate; pass execution_id (from the call's "
                    "_meta['toolwise/execution_id']) or the tool of a call made in this session"
                )
            execution_id = call.execution_id
        # Once committed, a rating must also be learned and its reward stored (another run's sync skips
        # this instance's ratings as learned live): a caller that goes away does not cut that short.
        work = asyncio.ensure_future(self._rate(session, execution_id, rating, comment))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            work.add_done_callback(_log_failure)
            raise

    async def _rate(
        self, session: Session, execution_id: str, rating: int, comment: str | None
    ) -> tuple[Execution, float]:
        event = await self.feedback.add_rating(execution_id, rating, comment, instance=self.instance_id)
        self.ratings_mark.add(event.rating.id)  # type: ignore[arg-type]
        execution = await self.with_query(event.execution)
        step = self._step_of(execution, self._history_before(session, execution), rating)
        previous_reward = execution.reward if execution.reward is not None else self.learner.reward_of(step)
        if self.settings.learning:
            reward = self.learner.observe_rating(step, self.rng, previous_reward, event.previous).reward
        else:
            reward = self.learner.reward_of(step)
        await self.feedback.set_reward(execution.id, reward)
        for call in session.calls:
            if call.execution_id == execution.id:
                session.reward_total += reward - (call.reward or 0.0)
                call.reward = reward
        return execution, reward

    @staticmethod
    def _history_before(session: Session, execution: Execution) -> list[str]:
        """The tools called before `execution` in its session, when this session still knows them."""
        end = execution.position - session.dropped
        if execution.session_id == session.id and 0 <= end <= len(session.calls):
            return session.tools[max(end - 2, 0) : end]
        return []

    async def end_session(self, session_id: str, outcome: Outcome) -> Episode:
        if outcome not in OUTCOMES:
            raise InvalidOutcomeError(outcome)
        await self.drain()
        session = self.sessions.pop(session_id)
        self.open_decisions.forget_session(session_id)
        if session is None or not session.length:
            raise FeedbackError(f"session {session_id!r} has no calls to end")
        episode = Episode(
            session_id=session.id,
            tools=session.tools,
            total_reward=session.reward_total,
            outcome=outcome,
            started_at=session.started_at,
            ended_at=utcnow(),
            namespace=self.namespace,
        )
        return await self.feedback.record_episode(episode)

    # -- the shared log: restarts and other instances ------------------------------------------------

    async def sync(self, progress: Callable[[int], None] | None = None) -> int:
        """Learn every execution and rating in the log not learned yet (another instance's, or an
        earlier run's after the snapshot it left); returns how many. Own live entries are only marked.
        Nothing new costs one probe of the log's heads; `progress` hears of each batch of entries read."""
        await self.drain()
        learned = 0
        mark, rmark = self.executions_mark, self.ratings_mark
        seq_head, rating_head = await self.feedback.log_heads(self.namespace)
        if seq_head > mark.floor:
            learned += (await self._sync_executions(progress))[0]
        if rating_head > rmark.floor:
            learned += await self._sync_ratings()
        now = time.monotonic()
        mark.advance(now, self.settings.sync_gap_grace_s)
        rmark.advance(now, self.settings.sync_gap_grace_s)
        self.synced += learned
        return learned

    async def _sync_executions(
        self, progress: Callable[[int], None] | None = None, *, after_seq: int = 0, limit: int | None = None
    ) -> tuple[int, int, bool]:
        """Learn the log's executions after the watermark's floor (or `after_seq`, if later), stopping
        after about `limit` entries; returns (learned, last seq read, whether the log's end was reached)."""
        learned = 0
        mark = self.executions_mark
        last = max(after_seq, mark.floor)
        read = 0
        async with aclosing(self.feedback.iter_log(namespace=self.namespace, after_seq=last)) as batches:
            async for entries in batches:
                fresh = [entry for entry in entries if mark.fresh(entry.seq)]
                history = {entry.seq: self._log_history(entry) for entry in fresh}
                own = self.instance_id
                foreign = [e.seq for e in fresh if e.instance != own and e.id not in self._live]
                for entry in fresh:
                    if entry.instance == own or entry.id in self._live:
                        self._queries.pop(entry.session_id, None)  # it may have changed the session's query
                executions = [
                    await self.with_query(execution, remember=True)
                    for execution in await self.feedback.executions_by_seq(foreign)
                ]
                # Learned and marked after the batch's last await: a cancelled sync leaves nothing half done.
                if self.catching_up:  # a replay: the batch at once (rl's batched path)
                    self._learn_logged_batch(executions, history)
                else:
                    for execution in executions:
                        self._learn_logged(execution, history[execution.seq])  # type: ignore[index]
                for entry in fresh:
                    mark.add(entry.seq)
                    self._live.discard(entry.id)
                mark.advance(time.monotonic(), self.settings.sync_gap_grace_s)
                learned += len(executions)
                last, read = entries[-1].seq, read + len(entries)
                if progress is not None:
                    progress(len(entries))
                await asyncio.sleep(0)  # a long replay lets the event loop serve between batches
                if limit is not None and read >= limit:
                    return learned, last, False
        return learned, last, True

    async def _sync_ratings(self) -> int:
        learned = 0
        rmark = self.ratings_mark
        async for events in self.feedback.iter_rating_events(namespace=self.namespace, after_id=rmark.floor):
            for event in events:
                if not rmark.fresh(event.rating.id):  # type: ignore[arg-type]
                    continue
                rmark.add(event.rating.id)  # type: ignore[arg-type]
                if event.rating.instance == self.instance_id:  # learned live by `rate`
                    continue
                self._learn_logged_rating(replace(event, execution=await self.with_query(event.execution)))
                learned += 1
        return learned

    async def with_query(self, execution: Execution, *, remember: bool = False) -> Execution:
        """`execution` with the recommend_tool query that was its context. A query is stored once, on
        the call that followed the recommendation; the session's later calls inherit it (from the
        calls learned just before, in log order, when `remember`; else from the log)."""
        if execution.query is None and execution.position > 0:
            found = self._queries.get(execution.session_id, _UNKNOWN) if remember else _UNKNOWN
            if found is _UNKNOWN:
                found = await self.feedback.session_query(
                    execution.session_id, namespace=self.namespace, before_seq=execution.seq
                )
            execution = replace(execution, query=found)
        if remember:  # a session without any query is remembered too: one look-up per session
            self._queries[execution.session_id] = execution.query
            self._queries.move_to_end(execution.session_id)
            if len(self._queries) > LOGGED_SESSIONS:
                self._queries.popitem(last=False)
        return execution

    def _log_history(self, entry: LogEntry) -> list[str]:
        """The (up to two) tools the session called before `entry`, as the log tells them; remembers
        this call too."""
        tools = self._logged.get(entry.session_id)
        if tools is None:
            tools = self._logged[entry.session_id] = []
            if len(self._logged) > LOGGED_SESSIONS:
                self._logged.popitem(last=False)
        position = entry.position
        before = tools[max(position - 2, 0) : position] if len(tools) >= position else []
        if len(tools) == position:
            tools.append(entry.tool)
        return before

    def _step_of(self, execution: Execution, history: list[str], rating: int | None = None) -> Step:
        """The learner's view of a recorded execution; `history` falls back to the previous tool."""
        if not history and execution.previous_tool:
            history = [execution.previous_tool]
        return Step(
            execution.tool,
            execution.success,
            execution.latency_ms / 1000,
            query=execution.query,
            previous_tool=execution.previous_tool,
            session_length=execution.position,
            history=tuple(history[-2:]),
            rating=rating,
        )

    def _learn_logged(self, execution: Execution, history: list[str]) -> None:
        self.unsnapshotted += 1
        self._observe(self._step_of(execution, history), None)
        self._shield(execution)

    def _learn_logged_batch(self, executions: list[Execution], history: dict[int, list[str]]) -> None:
        self.unsnapshotted += len(executions)
        if self.settings.learning:
            steps = [self._step_of(e, history[e.seq]) for e in executions]  # type: ignore[index]
            try:
                self.learner.learn_batch(steps, self.rng)
            except Exception:
                log.exception("learning from %d logged executions failed; they are recorded", len(steps))
        for execution in executions:
            self._shield(execution)

    def _shield(self, execution: Execution) -> None:
        """Tell the shields how the tool did, unless the failure was the caller's (invalid arguments)."""
        if execution.error_type != CALLERS_FAULT:
            self.shields.observe(execution.tool, execution.success, execution.latency_ms, time.monotonic())

    def _learn_logged_rating(self, event: RatingEvent) -> None:
        if not self.settings.learning:
            return
        execution = event.execution
        tools = self._logged.get(execution.session_id, [])
        step = self._step_of(execution, tools[: execution.position], event.rating.rating)
        previous_reward = self.learner.reward_of(replace(step, rating=event.previous))
        try:
            self.learner.observe_rating(step, self.rng, previous_reward, event.previous)
        except Exception:
            log.exception("learning from a rating of %s failed; the rating is recorded", execution.tool)

    # -- snapshots -----------------------------------------------------------------------------------

    def snapshot(self, source: str) -> SnapshotRecord:
        """The learned state as it is now (call after `drain`), with what of the log it covers."""
        state = {
            "learner": self.learner.state_dict(),
            "rng": self.rng.bit_generator.state,
            "counters": {"decisions": self.decisions, "calls": self.calls, "explored": self.explored},
        }
        payload = pack(state, deflate=source != "shutdown")  # shutdown: within the time a client gives
        record = SnapshotRecord(
            namespace=self.namespace,
            version=snapshots.VERSION,
            policy=self.learner.policy.name,
            source=source,
            created_at=utcnow(),
            sample_count=self.learner.updates,
            covered={
                "executions": self.executions_mark.state(),
                "ratings": self.ratings_mark.state(),
                "live": sorted(self._live),
            },
            sha256=snapshots.checksum(payload),
            payload=payload,
        )
        return snapshots.sign(record, self.sign_key) if self.sign_key is not None else record

    async def save_snapshot(self, source: str) -> SnapshotRecord:
        """Take a snapshot and store it (keeping the newest `snapshot_keep`)."""
        await self.drain()
        record = self.snapshot(source)
        learned = self.unsnapshotted
        self.snapshot_id = await self.feedback.save_snapshot(record, keep=self.settings.snapshot_keep)
        self.unsnapshotted -= learned  # what was learned while the snapshot was being stored is not in it
        log.info("snapshot %d saved (%s, %d samples)", self.snapshot_id, source, record.sample_count)
        return replace(record, id=self.snapshot_id)

    def load(self, record: SnapshotRecord, *, covered: dict[str, Any] | None = None) -> None:
        """Adopt a snapshot's state, all or nothing: verified and loaded into a fresh learner first,
        so a refused snapshot leaves the current state untouched. `covered` overrides what of the
        log the state counts as including (a restore or rollback takes it "as of now")."""
        snapshots.verify(record, self.verify_key)
        if record.policy != self.learner.policy.name:
            raise snapshots.SnapshotError(
                f"snapshot was learned by policy {record.policy!r}; this toolwise runs {self.learner.policy.name!r}"
            )
        try:
            state = unpack(record.payload)
            learner = self._new_learner()
            learner.load_state(state["learner"])
            rng = np.random.default_rng()
            rng.bit_generator.state = state["rng"]
        except (KeyError, ValueError, TypeError) as exc:
            raise snapshots.SnapshotError(f"snapshot state cannot be loaded: {exc}") from exc
        if self._tools:
            learner.set_tools(self._tools)  # the catalogue is what is running now
        covered = record.covered if covered is None else covered
        self.learner, self.rng = learner, rng
        counters = state.get("counters", {})
        self.decisions = int(counters.get("decisions", 0))
        self.calls = int(counters.get("calls", 0))
        self.explored = int(counters.get("explored", 0))
        self.executions_mark = Watermark.of(covered["executions"])
        self.ratings_mark = Watermark.of(covered["ratings"])
        self._live = set(covered.get("live", ()))
        self.snapshot_id = record.id

    async def restore_latest(self) -> str:
        """Load the newest usable snapshot and learn the log recorded after it (admin commands; a
        server catches up in the background instead). Returns what happened, for the log."""
        loaded = await self.load_latest()
        replayed = await self.catch_up()
        return f"{loaded} + {replayed} log entries replayed"

    async def load_latest(self) -> str:
        """Load the newest usable snapshot; one that cannot be used is reported and the next older one
        tried. Until `catch_up` has learned the log after it, the state lags: recommendations come from
        the prior. Returns what was loaded, for the log."""
        self.catching_up = True
        listing = await self.feedback.list_snapshots(self.namespace)
        self._restores_seen = max((r.id or 0 for r in listing), default=0)
        for listed in listing:
            record = await self.feedback.get_snapshot(listed.id, namespace=self.namespace)
            if record is None:
                continue
            try:
                self.load(record)
            except snapshots.SnapshotError as exc:
                log.warning("snapshot %s not used: %s", listed.id, exc)
                continue
            return f"snapshot {record.id} ({record.sample_count} samples, {record.created_at:%Y-%m-%d %H:%M:%S})"
        return "no snapshot"

    async def catch_up(self, snapshot_rows: int = 0) -> int:
        """Learn the log after the loaded snapshot, only that (the rows after the watermark), logging
        progress; with `snapshot_rows`, a snapshot is stored every that many rows learned (and no sooner
        than nine times the last one's cost after it), so a start cut short resumes where it stopped.
        Recommendations come from the prior meanwhile. Returns how many entries were learned."""
        mark = self.executions_mark
        self.replay_done = self.replay_total = 0
        self.catching_up = True
        began = self._replay_reported = time.monotonic()
        learned, cursor, next_snapshot = 0, mark.floor, 0.0
        try:
            self.replay_total = await self.feedback.count_executions(self.namespace, after_seq=mark.floor)
            while True:
                n, cursor, done = await self._sync_executions(
                    self._replayed, after_seq=cursor, limit=snapshot_rows or None
                )
                learned += n
                self.synced += n
                if done:
                    break
                if self.unsnapshotted >= snapshot_rows and time.monotonic() >= next_snapshot:
                    taken = time.monotonic()
                    await self.save_snapshot("periodic")
                    # a year's state takes seconds to store: at most a tenth of the replay goes to snapshots
                    next_snapshot = time.monotonic() + 9 * (time.monotonic() - taken)
            learned += await self.sync()
            self.learner.settle()  # what the batches left pending, before the first decision needs it
        finally:
            self.catching_up = False
        if self.replay_total:
            log.info("caught up with the log: %d entries learned in %.1f s", learned, time.monotonic() - began)
        return learned

    def _replayed(self, entries: int) -> None:
        """Count a batch of replayed log entries; say how far the replay is every REPLAY_REPORT_S."""
        self.replay_done += entries
        now = time.monotonic()
        if now - self._replay_reported >= REPLAY_REPORT_S:
            self._replay_reported = now
            share = 100 * self.replay_done / max(self.replay_total, 1)
            log.info("replaying the log: %d of %d entries (%.0f%%)", self.replay_done, self.replay_total, share)

    async def adopt(self, record: SnapshotRecord, source: str) -> SnapshotRecord:
        """Restore: make `record` the current state as of now (the log so far counts as covered, so it
        is not replayed on top) and store it as the newest snapshot. Refused → nothing changes."""
        await self.drain()
        seq, rating_id = await self.feedback.high_water(self.namespace)
        covered: dict[str, Any] = {
            "executions": {"floor": seq, "seen": []},
            "ratings": {"floor": rating_id, "seen": []},
            "live": [],
        }
        if record.id is not None:
            covered["origin"] = record.covered.get("origin") or record.id  # a stored one: where it comes from
        self.load(record, covered=covered)
        stored = replace(record, source=source, covered=covered, id=None, created_at=utcnow())
        if self.sign_key is not None:
            stored = snapshots.sign(stored, self.sign_key)
        elif stored.signature is not None:
            stored = replace(stored, signature=None)  # the covered marks changed: the old signature no longer fits
        self.snapshot_id = self._restores_seen = await self.feedback.save_snapshot(
            stored, keep=self.settings.snapshot_keep
        )
        log.warning("learned state replaced by a %s (%d samples)", source, record.sample_count)
        return replace(stored, id=self.snapshot_id)

    async def follow_restores(self) -> None:
        """Another process restored or rolled back a snapshot of this namespace: adopt it too."""
        for listed in await self.feedback.list_snapshots(self.namespace):
            if (listed.id or 0) <= self._restores_seen:
                return
            if listed.source not in ("restore", "rollback"):
                continue
            self._restores_seen = listed.id or 0
            record = await self.feedback.get_snapshot(listed.id, namespace=self.namespace)
            if record is not None:
                try:
                    self.load(record)
                    log.warning("adopted snapshot %s (%s by another process)", listed.id, listed.source)
                except snapshots.SnapshotError as exc:
                    log.warning("restored snapshot %s not adopted: %s", listed.id, exc)
            return
