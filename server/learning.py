"""Wiring what happened (feedback) to how to learn (rl): one object per running toolwise.

Every proxied call becomes an execution record (queued for group commit) and a learner update; a
rating recomputes that execution's reward and teaches the learner again; ending a session stores
its episode. The learner runs on the event loop (it is pure and fast); the database never sits on
the path of a call.

What a call leaves to do (build the record, compute the reward, queue the record, update the policy)
is deferred: `record` only notes it, and `drain` does it, at moments that cost a caller nothing
(while the next proxied call waits for its downstream, or after a short idle delay) and always before
anything reads what was learned or recorded (every own tool drains first; so does shutdown). Drained
in call order, so learning is the same as if each call had been learned from on the spot.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
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
    utcnow,
)
from toolwise.feedback.records import new_id
from toolwise.rl import Decision, Learner, LearnerConfig, RewardWeights, Step, ToolDoc
from toolwise.server.config import Settings
from toolwise.server.sessions import Call, Session, Sessions

log = logging.getLogger(__name__)


class NothingToRateError(FeedbackError):
    pass


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


IDLE_DRAIN_S = 0.05  # with no further call to carry it, deferred work is done this long after a call


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
    def __init__(self, settings: Settings, feedback: FeedbackService) -> None:
        weights = RewardWeights(**settings.reward.model_dump())
        self.learner = Learner(LearnerConfig(policy=settings.policy, reward=weights))
        self.rng = np.random.default_rng(settings.seed)
        self.feedback = feedback
        self.sessions = Sessions()
        self.namespace = settings.namespace
        self.decisions = 0
        self.calls = 0
        self.explored = 0
        self._pending: list[_Pending] = []
        self._idle: asyncio.TimerHandle | None = None
        self._draining: set[asyncio.Task[None]] = set()

    def set_tools(self, tools: list[types.Tool]) -> None:
        self.learner.set_tools([ToolDoc(t.name, f"{t.title or ''} {t.description or ''}") for t in tools])

    def recommend(self, session: Session, query: str, top_k: int, candidates: list[str] | None) -> Decision:
        decision = self.learner.recommend(
            query,
            self.rng,
            previous_tool=session.previous_tool,
            session_length=len(session.calls),
            candidates=candidates,
            top_k=top_k,
        )
        session.query, session.decision = query, decision
        self.decisions += 1
        self.explored += decision.explored
        return decision

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
    ) -> str:
        """Note one proxied call (session history now; record and learning at the next `drain`);
        returns the execution id."""
        decision, session.decision = session.decision, None
        step = Step(
            tool,
            outcome.success,
            latency_s,
            query=session.query,
            previous_tool=session.previous_tool,
            session_length=len(session.calls),
            history=tuple(session.tools[-2:]),
        )
        position = len(session.calls)
        call = Call(new_id(), tool, outcome.success, latency_s, None, step.query, step.previous_tool, position)
        session.add(call)
        noted = _Pending(call, session.id, step, server, arguments, outcome, started_at, utcnow(), decision)
        self._pending.append(noted)
        self.calls += 1
        if self._idle is None:
            self._idle = asyncio.get_running_loop().call_later(IDLE_DRAIN_S, self._drain_when_idle)
        return call.execution_id

    @property
    def pending(self) -> int:
        return len(self._pending)

    async def drain(self) -> None:
        """Record and learn from every call noted so far, in order."""
        while self._pending:
            pending, self._pending = self._pending, []
            for item in pending:
                await self._complete(item)

    async def _complete(self, item: _Pending) -> None:
        step, call = item.step, item.call
        reward = self.learner.reward_of(step)
        call.reward = reward
        decision = item.decision
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
            query=step.query,
            previous_tool=step.previous_tool,
            position=step.session_length,
            decision_id=None if decision is None else decision.decision_id,
            propensity=None if decision is None or decision.chosen != step.tool else decision.propensity,
            error_type=item.outcome.error_type,
            error_message=item.outcome.error_message,
            result_size=item.outcome.result_size,
            reward=reward,
        )
        await self.feedback.record_execution(execution)
        self._observe(step, reward)

    def _drain_when_idle(self) -> None:
        self._idle = None
        if self._pending:
            task = asyncio.get_running_loop().create_task(self.drain(), name="toolwise-drain")
            self._draining.add(task)
            task.add_done_callback(self._drained)

    def _drained(self, task: asyncio.Task[None]) -> None:
        self._draining.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("recording deferred calls failed", exc_info=task.exception())

    async def aclose(self) -> None:
        """Drain what is left (before the feedback service closes)."""
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None
        await self.drain()
        if self._draining:
            await asyncio.gather(*self._draining)

    def _observe(self, step: Step, reward: float) -> None:
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
        earlier = await self.feedback.get_ratings(execution_id)
        execution = await self.feedback.add_rating(execution_id, rating, comment)
        step = Step(
            execution.tool,
            execution.success,
            execution.latency_ms / 1000,
            query=execution.query,
            previous_tool=execution.previous_tool,
            session_length=execution.position,
            history=self._history_before(session, execution),
            rating=rating,
        )
        previous_reward = execution.reward if execution.reward is not None else self.learner.reward_of(step)
        observed = self.learner.observe_rating(step, self.rng, previous_reward, earlier[-1].rating if earlier else None)
        await self.feedback.set_reward(execution.id, observed.reward)
        for call in session.calls:
            if call.execution_id == execution.id:
                call.reward = observed.reward
        return execution, observed.reward

    @staticmethod
    def _history_before(session: Session, execution: Execution) -> tuple[str, ...]:
        """The tools called just before `execution` in its session (two when still known, else one)."""
        if execution.session_id == session.id and execution.position <= len(session.calls):
            return tuple(session.tools[: execution.position][-2:])
        return (execution.previous_tool,) if execution.previous_tool else ()

    async def end_session(self, session_id: str, outcome: Outcome) -> Episode:
        if outcome not in OUTCOMES:
            raise InvalidOutcomeError(outcome)
        await self.drain()
        session = self.sessions.pop(session_id)
        if session is None or not session.calls:
            raise FeedbackError(f"session {session_id!r} has no calls to end")
        episode = Episode(
            session_id=session.id,
            tools=session.tools,
            total_reward=sum(c.reward for c in session.calls if c.reward is not None),
            outcome=outcome,
            started_at=session.started_at,
            ended_at=utcnow(),
            namespace=self.namespace,
        )
        return await self.feedback.record_episode(episode)
