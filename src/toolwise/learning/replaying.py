"""Learning what the shared log holds: another instance's executions, ratings and episode ends, or an
earlier run's, replayed into the learned state. `learning/sharing.py` decides what and in which context
(the tools before each call, its query); this module turns log entries into learning, exactly as the
live path (`LearningService`) learns a call, a rating or an end. Its methods run on the learning thread
holding the lock (`LearningThread.hand_over`, by `Sharing`), never on the event loop: a batch of entries is
learned and marked there in one piece (`learn_executions`, `learn_columns`, `learn_ratings`, `learn_ends`),
its marks checked again first (a reader let in between its entries, or, for a batch learned at once, a
recommendation answered between its minibatch steps: `LearningThread.answer_midway`); the shields and counters
a call also updates are the loop's (`shield_columns`, `shield_executions`, once the batch is back)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from toolwise.feedback import Execution
from toolwise.feedback.records import LogColumns, RatingEvent
from toolwise.learning.core import learned_from
from toolwise.learning.service import LearningService
from toolwise.learning.sessions import step_columns, step_of
from toolwise.learning.watermark import Covered

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

    @property
    def reads_ends(self) -> bool:
        """Whether the end of an episode changes what the learner knows: a TD policy learns its last step again
        as terminal (`learns_ends`), and a policy that reads failures in hindsight (rl/hindsight.py) reads a
        failure of the session waiting for its next call as the session's end, as live (learning on)."""
        capabilities = self.learning.learner.policy.capabilities
        return self.learning.settings.learning and (capabilities.next_context or capabilities.hindsight)

    def end(self, execution: Execution) -> None:
        """An episode of the shared log (another instance's, or an earlier run's) ended after
        `execution`: learned as terminal as `end_session` does live, with the reward the log holds for
        it (a rating made after the end is in it; live, the end was learned before it). A call never
        learned (cancelled: no reward) has no transition to end. A failure of the session waiting for a
        next call (rl/hindsight.py) is read as the session's end, whatever the policy. Holding the lock; a
        failure is logged, not raised out of the batch (the sync would fail on it at every tick)."""
        learner, rng = self.learning.learner, self.learning.state.rng
        try:
            if self.learning.settings.learning and learner.waiting:
                learner.read_waiting(execution.session_id, rng)
            if self.learns_ends and execution.reward is not None:
                learner.end_episode(step_of(execution, (), self.learning.history_n), execution.reward, rng)
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
            pause = self.learning.thread.answer_midway  # recommendations between its minibatch steps
            try:
                self.learning.learner.learn_many(steps, self.learning.state.rng, pause=pause)
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

    def rating(self, event: RatingEvent, history: Sequence[str], *, after_failure: bool = False) -> None:
        """Learn a rating of the shared log (another instance's, or an earlier run's); `after_failure`: the
        session's call before the rated one failed. Holding the lock."""
        if not self.learning.settings.learning:
            return
        execution = event.execution
        step = step_of(
            execution, history, self.learning.history_n, rating=event.rating.rating, after_failure=after_failure
        )
        try:
            learner = self.learning.learner
            previous_reward = learner.reward_before_rating(step, execution.reward, event.rewarded, event.previous)
            learner.observe_rating(step, self.learning.state.rng, previous_reward, event.previous)
        except Exception:
            log.exception("learning from a rating of %s failed; the rating is recorded", execution.tool)

    def replaced(self, covered: Covered) -> bool:
        """Whether the learned state whose marks are `covered` was replaced (a restore, swapped in on the learning
        thread: `LearningCore.adopt`; it counts the log as of then as covered): what a sync or replay read for it
        is not learned into the new one. Asked on the loop before a batch is handed over, and on the thread again."""
        return self.learning.covered is not covered

    def advance(self, covered: Covered) -> None:
        """On the learning thread (every mark is changed there, holding the lock): the watermarks over
        what was learned, and over holes older than the grace period."""
        now, grace = time.monotonic(), self.learning.settings.sync_gap_grace_s
        for mark in (covered.executions, covered.ratings, covered.episodes):
            if mark is not None:
                mark.advance(now, grace)

    def learn_executions(
        self,
        covered: Covered,
        steps: list[tuple[Execution, list[str], bool]],
        ends: dict[str, int],
        fresh: list[tuple[int, str]],
    ) -> list[Execution] | None:
        """On the learning thread, holding the lock: learn a batch of the log's executions (each with the tools
        before it and whether the call before it failed) and the episode ends right after them, each marked as
        it is learned, so learned and marked go together for a reader let in between (a snapshot) and for a
        sync cancelled while it waits (the marks are checked again here: an entry a sync before learned is not
        learned twice); then every entry of the batch that was fresh, `fresh` (seq, id: those learned live
        too, only marked). Returns the executions learned; None when the state whose marks are `covered` was
        replaced before (`replaced`)."""
        if self.replaced(covered):
            return None
        thread, mark, live, emark = self.learning.thread, covered.executions, covered.live, covered.episodes
        done: list[Execution] = []
        for k, (execution, history, after) in enumerate(steps):
            assert execution.seq is not None  # read from the log
            if not mark.fresh(execution.seq):
                continue
            thread.between_steps(k)
            self.execution(execution, history, after_failure=after)
            end = ends.get(execution.id)
            if end is not None and emark is not None and emark.fresh(end):
                self.end(execution)
                emark.add(end)
            mark.add(execution.seq)
            done.append(execution)
        for seq, entry_id in fresh:
            mark.add(seq)
            live.discard(entry_id)
        mark.advance(time.monotonic(), self.learning.settings.sync_gap_grace_s)
        return done

    def learn_columns(
        self,
        covered: Covered,
        batch: LogColumns,
        fresh: list[int],
        rows: list[int],
        histories: list[list[str]],
        queries: list[str | None],
        flags: list[bool],
    ) -> list[int] | None:
        """On the learning thread, holding the lock: `learn_executions` for a replayed batch, learned at once
        (`columns`) and marked in the same hold. Rows `fresh` are marked, rows `rows` of them
        learned, but those a replay before learned (the marks are checked again here). Returns the rows
        learned; None when the state whose marks are `covered` was replaced before."""
        if self.replaced(covered):
            return None
        mark, live = covered.executions, covered.live
        kept = [k for k, i in enumerate(rows) if mark.fresh(batch.seq[i])]
        if len(kept) < len(rows):
            rows, histories = [rows[k] for k in kept], [histories[k] for k in kept]
            queries, flags = [queries[k] for k in kept], [flags[k] for k in kept]
        self.columns(batch, rows, histories, queries, flags)
        for i in fresh:
            mark.add(batch.seq[i])
            live.discard(batch.id[i])
        mark.advance(time.monotonic(), self.learning.settings.sync_gap_grace_s)
        return rows

    def learn_ratings(
        self, covered: Covered, todo: list[tuple[RatingEvent, list[str], bool]], others: list[int]
    ) -> int | None:
        """On the learning thread, holding the lock: learn and mark a batch of the log's ratings, each with
        the tools before its call, but those a sync before learned, then move the watermark over them and over
        `others`, the other namespaces' ratings read with them (a namespace that rates nothing more reads those
        once, not at every sync). Returns how many were learned; None when the state whose marks are
        `covered` was replaced before."""
        if self.replaced(covered):
            return None
        rmark, learned, thread = covered.ratings, 0, self.learning.thread
        for event, before, after_failure in todo:
            rating_id = event.rating.id
            assert rating_id is not None  # read from the log
            if rmark.fresh(rating_id):
                thread.between_steps(learned)  # a blocked reader waits for a chunk, not the batch
                self.rating(event, before, after_failure=after_failure)
                rmark.add(rating_id)
                learned += 1
        rmark.advance(time.monotonic(), self.learning.settings.sync_gap_grace_s, others)
        return learned

    def learn_ends(self, covered: Covered, todo: list[tuple[int, str, Execution | None]]) -> bool:
        """On the learning thread, holding the lock: learn (those with their step) and mark a batch of the
        log's episode ends, but those a sync before marked. Returns whether the state whose marks are
        `covered` was replaced before (then nothing is done)."""
        emark, live, thread = covered.episodes, covered.live, self.learning.thread
        if self.replaced(covered) or emark is None:
            return True
        for k, (seq, end_id, execution) in enumerate(todo):
            if not emark.fresh(seq):
                continue
            if execution is not None:
                thread.between_steps(k)  # a blocked reader waits for a chunk, not the batch
                self.end(execution)
            emark.add(seq)
            live.discard(end_id)
        return False
