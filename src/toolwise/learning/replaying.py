"""Learning what the shared log holds: another instance's executions, ratings and episode ends, or an
earlier run's, replayed into the learned state. `learning/sharing.py` decides what and in which context
(the tools before each call, its query); this module turns log entries into learning, exactly as the
live path (`LearningService`) learns a call, a rating or an end. Its methods run on the learning thread
holding the lock (`LearningThread.run`, handed over by `Sharing`), never on the event loop; the shields
and counters a call also updates are the loop's (`shield_columns`, after the batch comes back)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from toolwise.feedback import Execution
from toolwise.feedback.records import LogColumns, RatingEvent
from toolwise.learning.core import learned_from
from toolwise.learning.service import LearningService
from toolwise.learning.sessions import step_columns, step_of

log = logging.getLogger(__name__)


class LogLearning:
    def __init__(self, learning: LearningService) -> None:
        self.learning = learning

    def execution(self, execution: Execution, history: Sequence[str], *, after_failure: bool = False) -> None:
        """Learn an execution of the shared log (another instance's, or an earlier run's); `after_failure`:
        its session's call before it failed. Holding the lock."""
        if learned_from(execution.error_type):
            step = step_of(execution, history, self.learning.history_n, after_failure=after_failure)
            self.learning.observe(step)

    @property
    def learns_ends(self) -> bool:
        """Whether the end of an episode teaches the learner anything (a TD policy, learning on)."""
        return self.learning.settings.learning and self.learning.learner.policy.capabilities.next_context

    def end(self, execution: Execution) -> None:
        """An episode of the shared log (another instance's, or an earlier run's) ended after
        `execution`: learned as terminal as `end_session` does live, with the reward the log holds for
        it (a rating made after the end is in it; live, the end was learned before it). A call never
        learned (cancelled: no reward) has no transition to end. A failure of the session waiting for a
        next call (rl/hindsight.py) is read as the session's end, whatever the policy. Holding the lock."""
        if self.learning.settings.learning and self.learning.learner.waiting:
            self.learning.learner.read_waiting(execution.session_id, self.learning.state.rng)
        if not self.learns_ends or execution.reward is None:
            return
        try:
            self.learning.learner.end_episode(
                step_of(execution, (), self.learning.history_n), execution.reward, self.learning.state.rng
            )
        except Exception:
            log.exception("learning the end of session %s failed; the episode is recorded", execution.session_id)

    def columns(
        self,
        batch: LogColumns,
        rows: list[int],
        histories: list[list[str]],
        queries: list[str | None],
        after_failure: list[bool] | None = None,
    ) -> None:
        """Learn rows `rows` of a replayed batch of the log at once, each with the tools before it in
        its session and its query, without an object a row (a cancelled call is left out, see
        `learned_from`). Holding the lock."""
        error = batch.error_type
        kept = [k for k, i in enumerate(rows) if learned_from(error[i])]
        rows, histories, queries = [rows[k] for k in kept], [histories[k] for k in kept], [queries[k] for k in kept]
        flags = None if after_failure is None else [after_failure[k] for k in kept]
        if self.learning.settings.learning:
            steps = step_columns(batch, rows, histories, queries, self.learning.history_n, flags)
            try:
                self.learning.learner.learn_many(steps, self.learning.state.rng)
            except Exception:
                log.exception("learning from %d logged executions failed; they are recorded", len(rows))

    def shield_columns(self, batch: LogColumns, rows: list[int] | None) -> None:
        """On the event loop, once rows `rows` of a batch are learned: count them and tell the shields
        how their tools did, as the live path does for a call (`LearningService._complete`). None: none
        was (the state was replaced)."""
        if rows is None:
            return
        self.learning.state.learned(len(rows))
        now, tool, success, error = time.monotonic(), batch.tool, batch.success, batch.error_type
        latency = batch.latency_ms
        for i in rows:
            if learned_from(error[i]):
                self.learning.shield_fields(tool[i], success[i], latency[i], error[i], now)

    def shield_executions(self, executions: Sequence[Execution] | None) -> None:
        """`shield_columns` of executions learned one at a time."""
        if executions is None:
            return
        self.learning.state.learned(len(executions))
        for execution in executions:
            self.learning.shield(execution)

    def rating(self, event: RatingEvent, history: Sequence[str]) -> None:
        """Learn a rating of the shared log (another instance's, or an earlier run's). Holding the lock."""
        if not self.learning.settings.learning:
            return
        execution = event.execution
        step = step_of(execution, history, self.learning.history_n, rating=event.rating.rating)
        try:
            learner = self.learning.learner
            previous_reward = learner.reward_of(replace(step, rating=event.previous))
            learner.observe_rating(step, self.learning.state.rng, previous_reward, event.previous)
        except Exception:
            log.exception("learning from a rating of %s failed; the rating is recorded", execution.tool)
