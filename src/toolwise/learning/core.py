"""What the learning service holds and answers between calls: the learned state (a `LearnedState`,
learning/learned.py, that a snapshot replaces whole through `adopt`), the catalogue the learner knows
(`set_tools`, taught by learning/teaching.py), the session and open decision a call belongs to
(`attribute`), and the shields. Noting, recording and learning the calls is `learning/service.py`'s
`LearningService`, built on it.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import mcp_types as types
import numpy as np
from numpy.typing import NDArray

from toolwise.background import Background
from toolwise.config import Settings
from toolwise.downstream.errors import CallCancelledError, InvalidArgumentsError
from toolwise.downstream.shields import Budget, Shields
from toolwise.feedback import (
    Execution,
    FeedbackService,
)
from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN
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
from toolwise.learning.teaching import Teaching
from toolwise.learning.watermark import Covered
from toolwise.learning.worker import LearningThread, StateLock
from toolwise.rl import Learner, LearnerConfig, RewardWeights, Step, ToolDoc
from toolwise.rl.arguments import ArgumentMemory
from toolwise.rl.exploration import EPSILON_MAX, ExplorationConfig
from toolwise.rl.fit import FitConfig
from toolwise.rl.text import action_word

log = logging.getLogger(__name__)

T = TypeVar("T")


def tool_doc(tool: types.Tool) -> ToolDoc:
    """What the learner knows of a listed tool."""
    annotations = tool.annotations
    return ToolDoc(
        tool.name,
        f"{tool.title or ''} {tool.description or ''}",
        tool_document(tool.name, tool.title, tool.description, tool.input_schema),
        tool_effect(annotations.read_only_hint, annotations.destructive_hint) if annotations else "unknown",
        action_word(tool.description or ""),  # a title ("Git Checkout") names the tool, not what it does
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


def learner_config(s: Settings) -> LearnerConfig:
    """The learner's configuration as the settings give it (a server's, or a benchmark's own learner)."""
    return LearnerConfig(
        policy=s.policy,
        reward=RewardWeights(**s.reward.model_dump()),
        replay_enabled=s.replay,
        sequences_enabled=s.sequences,
        exploration=ExplorationConfig(epsilon_min=s.epsilon_min, epsilon_max=max(s.epsilon_min, EPSILON_MAX)),
        fit=FitConfig(enabled=s.nothing_fits),
    )


class LearningCore:
    """The learned state and the catalogue, attribution and shields around it (`LearningService` adds
    the calls: note, drain, learn, record)."""

    def __init__(self, settings: Settings, feedback: FeedbackService, metrics: Metrics | None = None) -> None:
        self.settings = settings
        self.feedback = feedback
        self.metrics = metrics
        self.instance_id = new_id()
        self.embedder = load_embedder(settings.embedding)
        self.thread = LearningThread()
        self.teaching = Teaching(self.thread.lock, lambda: self.learner, self.embedder, self.read_learned)
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
        self._pending: deque[Call] = deque()
        self._noted = 0  # calls noted so far: the first `_taken` of them have left `_pending`, learned and queued
        self._taken = 0
        self._order = asyncio.Lock()  # one drainer at a time, so calls are learned in call order
        self._drainers = 0  # drains and restores holding `_order` or waiting for it (`LearningService._in_order`)
        self._idle: asyncio.TimerHandle | None = None
        self._seen = 0  # `_noted` at the idle drain's last look: more since then, and calls are still coming
        self._latest = 0.0  # the loop's time by which the idle drain runs, calls coming or not
        self._burst = False  # the idle drain waits for a burst of calls to pause (a read starts it: `caught_up`)
        self._sustained = False  # calls went on past that wait's bound: learned as they come until they pause
        self._draining = Background()
        self._unawaited: dict[asyncio.Future[Any], str] = {}  # work gone on without its caller (what): awaited at close
        self._closing = False

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
    def lock(self) -> StateLock:
        """Held to read or change the learned state (the learning thread changes it). The event loop takes it
        through `read_learned`, which never blocks the loop on it; a `with` of it blocks its thread."""
        return self.thread.lock

    async def read_learned(self, read: Callable[[Learner], T], *, beside: bool = False, midway: bool = False) -> T:
        """`read(learner)` of the current learner holding the lock, from the event loop, never blocking the
        loop on it (`LearningThread.read`): at once when the lock is free, else beside the loop once the chunk
        or run being learned is done, or with `midway` (a recommendation) at the run's next break, by the
        learning thread; with `beside`, beside the loop always (a read as long as the state or the catalogue).
        Every read of the loop (a recommendation, a rating, the statistics) goes through here; `read` may
        change the state too (a rating, a decision's exploration and rng, a catalogue)."""
        # the learner looked up under the lock: a restore replaces it
        return await self.thread.read(lambda: read(self.learner), beside=beside, midway=midway)

    async def adopt(self, make: Callable[[], LearnedState]) -> None:
        """Make `make()` the learned state, whole (a snapshot loaded or restored), never blocking the event
        loop on the lock: made and swapped in on the learning thread holding it (`make` sees the catalogue the
        running learner knows then), after the work handed over before it: a batch of the shared log read for
        the state it replaces is learned into that one, or stops there (`Sharing`). The counters are the
        loop's, this instance's: they carry over, with the decisions and calls counted meanwhile."""

        def swap() -> tuple[LearnedState, LearnedState]:
            state = make()
            replaced, self.state = self.state, state
            return state, replaced

        def carry(states: tuple[LearnedState, LearnedState]) -> None:
            states[0].carry_over(states[1])

        await self.thread.hand_over(swap, carry)

    def new_learner(self, *, reuse: bool = False) -> Learner:
        """A learner as configured, knowing the running catalogue, that has learned nothing. `reuse`: its
        documents' vectors are the running learner's (same texts, same embedder), not embedded again, and
        those still waiting to be embedded wait in it too."""
        if not reuse:
            return Learner(learner_config(self.settings), self.tool_docs, self.embedder)
        vectors, later = self.running_vectors()
        learner = Learner(learner_config(self.settings), (), self.embedder)
        learner.set_tools(self.tool_docs, vectors, later=later)
        return learner

    @property
    def tool_docs(self) -> list[ToolDoc]:
        """The catalogue the learner knows."""
        return self.teaching.docs

    def running_vectors(self) -> tuple[dict[str, NDArray[np.float32]], frozenset[str]]:
        """The running learner's document vectors and the documents still waiting to be embedded, read
        together (`Teaching.running_vectors`)."""
        return self.teaching.running_vectors()

    @property
    def serving(self) -> str:
        """What answers recommend_tool: the policy, or the lexical baseline in shadow mode."""
        if self.loading and self.learner.index.unembedded:
            return (
                f"prior (catching up: embedding {len(self.learner.index.unembedded):,} tool documents, BM25 meanwhile)"
            )
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

    async def until_caught_up(self) -> None:
        """Return once the learned state is loaded and has learned the log after it (at once outside a server's
        start-up): a decision under a seed waits for it, so that it replays exactly (server/handlers.py)."""
        await self.progress.until_caught_up()

    async def set_tools(self, tools: list[types.Tool], *, first: bool = False) -> None:
        """Teach the learner the running catalogue (`Teaching.set_tools`); returns once it knows this one (or
        a newer), or with `first` (a server's start) at once, the learner listing it beside the event loop
        (`catalogue_listed`), BM25 alone scoring it until it is embedded."""
        await self.teaching.set_tools([tool_doc(t) for t in tools], first=first)

    async def catalogue_listed(self) -> None:
        """Return once the learner lists the catalogue a server's start gave it (`Teaching.listed`)."""
        await self.teaching.listed()

    async def catalogue_taken(self) -> None:
        """Return once the learner has the last catalogue given, every document embedded."""
        await self.teaching.taken()

    async def stop_teaching(self) -> None:
        """Shutting down: a catalogue still being embedded is not waited for (`Teaching.stop`)."""
        await self.teaching.stop()

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
        from (`learned_from`). Without the lock: a proxied call never waits for the learning thread's run
        (`Learner.reward_of` says why that is safe); a mean a call stale is fine for a trace."""
        if not learned_from(execution.error_type):
            return None
        learner = self.learner  # read once: a restore replaces it (`adopt`)
        return learner.reward_of(step_of(execution, (), learner.config.sequence_n - 1))

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
