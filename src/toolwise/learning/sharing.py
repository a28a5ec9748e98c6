"""Sharing the log: what other instances (and earlier runs) recorded, learned exactly once.

Instances sharing one database learn together: `sync` reads the log after the watermarks (the log's
heads first, so nothing new costs one probe) and teaches the learner each execution and rating it has
not learned yet, in the context it was made in (the session's query and recent tools, rebuilt from
the log); `catch_up` does the same for the log after the snapshot a start loaded.

What to learn is chosen on the event loop (the log read, each entry's context); the learning is done on
the learning thread, a batch at a time, holding the lock (`LearningThread.hand_over`), and so is every
change of the marks (`Covered`): a batch is learned and marked in one piece there, its marks checked
again first, so a sync cancelled while its batch waits leaves it learned once and marked, and a restore
swapped in before it (`LearningCore.adopt`, on the same thread) stops it. A reader waits for a chunk of a
sync's batch (`LearningThread.between_steps`), a recommendation for a minibatch step of a replay's (learned
at once: `LearningThread.answer_midway` between its steps, as for a run of live calls); what copies the state
waits for the batch's end, when it is marked. The shields, the counters and
the catch-up's progress are the loop's, updated once a batch is back. The loop touches the marks only
to read them (a first choice of what is fresh); its own calls are added to `live` as the learning thread
learns them (`LearningService._learn`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from toolwise.config import Settings
from toolwise.feedback import Execution, FeedbackService
from toolwise.feedback.records import RatingEvent
from toolwise.learning.replaying import LogLearning
from toolwise.learning.service import LearningService, with_session_query
from toolwise.learning.watermark import Covered

log = logging.getLogger(__name__)

_UNKNOWN: Any = object()  # a session whose query has not been looked up
REPLAY_REPORT_S = 2.0  # how often a long replay reports its progress in the log
REPLAY_BATCH = 2_000  # log entries a replay reads and learns at once (on the learning thread: one hand-over each)
FREEZE_ROWS = 50_000  # a replay this long first freezes what start-up left alive (see `catch_up`)
CHECKPOINT_SHARE = 0.05  # at most this share of a replay's time goes to its periodic snapshots
LOGGED_SESSIONS = 10_000  # sessions of the shared log whose recent tools are remembered (n-gram history)


@dataclass(slots=True)
class LoggedTools:
    """A session's tools as the log tells them, in order: its recent ones only (at least `window`, at most
    twice that, as `Session` keeps them live), and how many came before them, so a session that goes on
    for ever costs a bounded memory."""

    tools: list[str] = field(default_factory=list)
    dropped: int = 0  # tools trimmed off the front

    def __len__(self) -> int:
        return len(self.tools)

    def upto(self, position: int) -> list[str]:
        """The remembered tools before `position`."""
        return self.tools[: position - self.dropped] if position >= self.dropped else []

    def before(self, position: int, n: int) -> list[str]:
        """The `n` tools before `position` when they are all remembered in order (else none)."""
        end = position - self.dropped
        return self.tools[max(end - n, 0) : end] if 0 <= end <= len(self.tools) else []

    def add(self, position: int, tool: str, window: int) -> None:
        """The session's call at `position` was of `tool`: remembered if it is the next one."""
        if position == self.dropped + len(self.tools):
            self.tools.append(tool)
            if len(self.tools) > 2 * window:
                cut = len(self.tools) - window
                self.dropped += cut
                del self.tools[:cut]


class Sharing:
    def __init__(self, settings: Settings, feedback: FeedbackService, learning: LearningService) -> None:
        self.settings = settings
        self.feedback = feedback
        self.learning = learning
        self.logged = LogLearning(learning)  # turns the log entries chosen here into learning
        self.namespace = settings.namespace
        self.synced = 0  # executions and ratings learned from the shared log (other instances, restarts)
        self._logged: OrderedDict[str, LoggedTools] = OrderedDict()  # session → its recent tools, from the log
        self._last: OrderedDict[str, tuple[int, bool]] = OrderedDict()  # session → its last call's position, success
        self._queries: OrderedDict[str, str | None] = OrderedDict()  # session → its query, from the log
        self._replay_reported = 0.0  # when the replay's progress was last logged (monotonic s)

    @property
    def covered(self) -> Covered:
        """The learned state's marks (a snapshot load replaces them with the state)."""
        return self.learning.covered

    async def sync(self, progress: Callable[[int], None] | None = None) -> int:
        """Learn every execution and rating in the log not learned yet (another instance's, or an
        earlier run's after the snapshot it left); returns how many. Entries learned live are only marked.
        Nothing new costs one probe of the log's heads; `progress` hears of each batch of entries read."""
        await self.learning.drain()
        learned = 0
        covered = self.covered
        mark, rmark = covered.executions, covered.ratings
        seq_head, rating_head, episode_head = await self.feedback.reads.heads(self.namespace)
        if seq_head > mark.floor:
            learned += (await self._sync_executions(progress))[0]
        if rating_head > rmark.floor:
            learned += await self._sync_ratings()
        await self._sync_episode_ends(episode_head)
        if any(m is not None and m.seen for m in (mark, rmark, covered.episodes)):  # an idle tick: no hand-over
            await self.learning.thread.run(partial(self.logged.advance, covered))
        self.synced += learned
        return learned

    async def _sync_executions(
        self, progress: Callable[[int], None] | None = None, *, after_seq: int = 0, limit: int | None = None
    ) -> tuple[int, int, bool]:
        """Learn the log's executions after the watermark's floor (or `after_seq`, if later), stopping
        after about `limit` entries; returns (learned, last seq read, whether the log's end was reached)."""
        learned = 0
        covered = self.covered
        mark, live = covered.executions, covered.live
        last = max(after_seq, mark.floor)
        read = 0
        async with aclosing(self.feedback.reads.iter_log(namespace=self.namespace, after_seq=last)) as batches:
            async for entries in batches:
                fresh = [entry for entry in entries if mark.fresh(entry.seq)]
                history = {e.seq: self._log_history(e.session_id, e.position, e.tool) for e in fresh}
                # Learned live: in `live`, whichever instance's. An own entry outside it was learned into a
                # state replaced since (another process's restore, followed): learned here as anyone's.
                foreign = [e.seq for e in fresh if e.id not in live]
                for entry in fresh:
                    if entry.id in live:
                        self._queries.pop(entry.session_id, None)  # it may have changed the session's query
                executions = [
                    await self.with_query(execution)
                    for execution in await self.feedback.reads.executions_by_seq(foreign)
                ]
                ends = await self._ends_after(executions)
                if self.logged.replaced(covered):
                    return learned, last, True
                steps = [
                    (e, history[e.seq], self._after_failure(e.session_id, e.position, e.success))
                    for e in executions
                    if e.seq is not None  # read from the log: always
                ]
                entries_read = [(entry.seq, entry.id) for entry in fresh]
                # Learned and marked on the learning thread, in one piece: a sync cancelled while it waits
                # leaves the batch learned and marked, once (`LearningThread.hand_over`).
                work = partial(self.logged.learn_executions, covered, steps, ends, entries_read)
                done = await self.learning.thread.hand_over(work, self.logged.shield_executions)
                if done is None:  # replaced on the learning thread, before the batch
                    return learned, last, True
                learned += len(done)
                last, read = entries[-1].seq, read + len(entries)
                if progress is not None:
                    progress(len(entries))
                await asyncio.sleep(0)  # a long replay lets the event loop serve between batches
                if limit is not None and read >= limit:
                    return learned, last, False
        return learned, last, True

    async def _replay_executions(self, after_seq: int, limit: int | None) -> tuple[int, int, bool]:
        """`_sync_executions` for a replay (rl's batched path): the log read as columns, one read a
        batch, each batch learned at once."""
        learned, read = 0, 0
        covered = self.covered
        mark, live = covered.executions, covered.live
        last = max(after_seq, mark.floor)
        log_columns = self.feedback.reads.iter_log_columns(namespace=self.namespace, after_seq=last, batch=REPLAY_BATCH)
        async with aclosing(log_columns) as batches:
            async for batch in batches:
                fresh: list[int] = []
                rows: list[int] = []  # the fresh ones to learn (not learned live)
                histories: list[list[str]] = []
                queries: list[str | None] = []
                flags: list[bool] = []  # whether the session's call before it failed
                for i, (seq, session_id, position) in enumerate(
                    zip(batch.seq, batch.session_id, batch.position, strict=True)
                ):
                    if not mark.fresh(seq):
                        continue
                    fresh.append(i)
                    history = self._log_history(session_id, position, batch.tool[i])
                    after = self._after_failure(session_id, position, batch.success[i])
                    if batch.id[i] in live:  # learned live (`_sync_executions`)
                        self._queries.pop(session_id, None)  # it may have changed the session's query
                        continue
                    rows.append(i)
                    histories.append(history)
                    flags.append(after)
                    queries.append(await self._remembered_query(session_id, position, batch.query[i], seq))
                if self.logged.replaced(covered):
                    return learned, last, True
                # Learned and marked on the learning thread, in one piece (`_sync_executions`).
                work = partial(self.logged.learn_columns, covered, batch, fresh, rows, histories, queries, flags)
                done = await self.learning.thread.hand_over(work, partial(self.logged.shield_columns, batch))
                if done is None:  # replaced on the learning thread, before the batch
                    return learned, last, True
                learned += len(done)
                last, read = batch.seq[-1], read + len(batch)
                self._replayed(len(batch))
                await asyncio.sleep(0)  # a long replay lets the event loop serve between batches
                if limit is not None and read >= limit:
                    return learned, last, False
        return learned, last, True

    async def _sync_ratings(self) -> int:
        """Learn the ratings logged since the watermark, each after its call: a rating whose call is not learned
        yet (the call and the rating committed after this sync read the executions) waits for the next sync,
        and the ratings after it with it, in order, as `_sync_episode_ends` does for an end."""
        learned = 0
        covered = self.covered
        rmark, mark, live = covered.ratings, covered.executions, covered.live
        async for page in self.feedback.reads.iter_rating_events(namespace=self.namespace, after_id=rmark.floor):
            todo: list[tuple[RatingEvent, list[str], bool]] = []
            waits = False
            for event in page.events:
                rating_id = event.rating.id
                assert rating_id is not None  # read from the log
                if not rmark.fresh(rating_id):  # learned live (`Agent.rate` marks it as it learns), or by a sync
                    continue
                assert event.execution.seq is not None  # read from the log
                if mark.fresh(event.execution.seq) and event.execution.id not in live:  # its call: not learned yet
                    waits = True
                    break
                execution = await with_session_query(self.feedback, event.execution, self.namespace)
                tools = self._logged.get(execution.session_id)
                after = await self.feedback.reads.failed_before(
                    execution.session_id, execution.position, namespace=self.namespace, before_seq=event.execution.seq
                )  # the n-grams the call was counted in are those marked after a failure (as live)
                todo.append(
                    (replace(event, execution=execution), tools.upto(execution.position) if tools else [], after)
                )
            if self.logged.replaced(covered):
                return learned
            learn = partial(self.logged.learn_ratings, covered, todo, page.others)
            done = await self.learning.thread.hand_over(learn, _nothing)
            if done is None:
                return learned
            learned += done
            if waits:
                return learned
        return learned

    async def _ends_after(self, executions: list[Execution]) -> dict[str, int]:
        """The episode ends (by seq, keyed by the execution they follow) logged right after these
        executions and not learned yet: learned right after their step, in the order a live learner
        learned them (a failure waiting for its session's next call is read as ended before a later call of
        a session of that name). Only for a learner that an end teaches (`LogLearning.reads_ends`); a state
        from before ends were shared leaves them to the episode walk of `sync`."""
        emark, live = self.covered.episodes, self.covered.live
        if emark is None or not executions or not self.logged.reads_ends:
            return {}
        ends = await self.feedback.reads.episode_ends_after([e.id for e in executions], namespace=self.namespace)
        return {
            end.execution.id: end.seq
            for end in ends
            if end.execution is not None and emark.fresh(end.seq) and end.id not in live  # live: learned live
        }

    async def _sync_episode_ends(self, head: int) -> None:
        """Learn the episode ends logged since the watermark (another instance's, or an earlier run's)
        as `end_session` did live: the episode's last step again, as terminal. After the executions, so
        the step is learned first; an end whose step is not learned yet (committed after this sync read
        the executions) waits for the next sync, and the ends after it with it, in order. O(new ends).
        Ends learned live (in `live`) are only marked; with a policy an end teaches nothing, ends are marked
        and not learned."""
        covered = self.covered
        emark, live = covered.episode_mark(head), covered.live
        if head <= emark.floor:
            return
        batches = self.feedback.reads.iter_episode_ends(namespace=self.namespace, after_seq=emark.floor)
        async with aclosing(batches) as ends:
            async for batch in ends:
                todo: list[tuple[int, str, Execution | None]] = []  # (seq, id, the step it ends, when learned)
                waits = False  # an end whose step is not learned yet: it and those after it wait
                for end in batch:
                    execution = end.execution
                    if not emark.fresh(end.seq):
                        continue
                    if end.id in live or execution is None:  # live: learned live
                        todo.append((end.seq, end.id, None))
                        continue
                    assert execution.seq is not None  # read from the log
                    if covered.executions.fresh(execution.seq):
                        waits = True
                        break
                    todo.append((end.seq, end.id, await self._ended(execution)))
                if self.logged.replaced(covered):
                    return
                replaced = bool(todo) and await self.learning.thread.hand_over(
                    partial(self.logged.learn_ends, covered, todo), _nothing
                )
                if replaced or waits:  # replaced on the learning thread, or an end waits for its step
                    return

    async def _ended(self, execution: Execution) -> Execution | None:
        """The step an end of the log follows, as `LogLearning.end` learns it: in its context for a TD policy;
        for a policy reading failures in hindsight, only its session is read (no query looked up); None when
        an end teaches nothing."""
        if self.logged.learns_ends:
            return await self.with_query(execution)
        return execution if self.logged.reads_ends else None

    async def with_query(self, execution: Execution) -> Execution:
        """`execution`, learned in log order, with the recommend_tool query that was its context. A query
        is stored once, on the call that followed the recommendation; the session's later calls inherit
        it from the calls learned just before (`_remembered_query`)."""
        assert execution.seq is not None  # read from the log
        session_id, position = execution.session_id, execution.position
        query = await self._remembered_query(session_id, position, execution.query, execution.seq)
        return execution if query == execution.query else replace(execution, query=query)

    async def _remembered_query(self, session_id: str, position: int, query: str | None, seq: int) -> str | None:
        """The query of the session's call at `position` (`seq` in the log): its own, else the one the
        session's calls learned just before had (in log order), else the log's."""
        if query is None and position > 0:
            found = self._queries.get(session_id, _UNKNOWN)
            if found is _UNKNOWN:
                found = await self.feedback.reads.session_query(session_id, namespace=self.namespace, before_seq=seq)
            query = found
        # a session without any query is remembered too: one look-up per session
        self._queries[session_id] = query
        self._queries.move_to_end(session_id)
        if len(self._queries) > LOGGED_SESSIONS:
            self._queries.popitem(last=False)
        return query

    def _after_failure(self, session_id: str, position: int, success: bool) -> bool:
        """Whether the session's call just before `position` failed, as the log told it; remembers this one."""
        last = self._last.get(session_id)
        self._last[session_id] = (position, success)
        self._last.move_to_end(session_id)
        if len(self._last) > LOGGED_SESSIONS:
            self._last.popitem(last=False)
        return last is not None and last[0] == position - 1 and not last[1]

    def _log_history(self, session_id: str, position: int, tool: str) -> list[str]:
        """The tools the session called just before its call at `position` (the sequence model's
        prefix), as the log tells them; remembers this call too."""
        tools = self._logged.get(session_id)
        if tools is None:
            tools = self._logged[session_id] = LoggedTools()
            if len(self._logged) > LOGGED_SESSIONS:
                self._logged.popitem(last=False)
        before = tools.before(position, self.learning.history_n)
        tools.add(position, tool, self.learning.sessions.window)
        return before

    async def catch_up(self, snapshot_rows: int = 0, checkpoint: Callable[[], Awaitable[object]] | None = None) -> int:
        """Learn the log after the loaded snapshot, only that (the rows after the watermark), logging
        progress; with `snapshot_rows`, `checkpoint` (a snapshot) runs every that many rows learned (and
        no sooner than the last one's cost over `CHECKPOINT_SHARE` after it), so a start cut short resumes where it
        stopped. Recommendations come from the prior meanwhile. Returns how many entries were learned."""
        learning = self.learning
        mark = self.covered.executions
        progress = learning.progress
        progress.begin_replay()
        began = self._replay_reported = time.monotonic()
        learned, cursor, next_checkpoint = 0, mark.floor, 0.0
        try:
            progress.to_replay(await self.feedback.reads.count_executions(self.namespace, after_seq=mark.floor))
            if progress.total >= FREEZE_ROWS:
                # A long replay allocates millions of short-lived objects, and each of the collections they
                # trigger walked everything alive since start-up (modules, catalogue, learner): moved out of
                # the collector's sight for good (gunicorn's trick).
                gc.collect()
                gc.freeze()
            while True:
                if self.logged.learns_ends:  # each end learned right after its step, as live: step by step
                    n, cursor, done = await self._sync_executions(
                        self._replayed, after_seq=cursor, limit=snapshot_rows or None
                    )
                else:
                    n, cursor, done = await self._replay_executions(cursor, snapshot_rows or None)
                learned += n
                self.synced += n
                if done:
                    break
                due = learning.state.unsnapshotted >= snapshot_rows and time.monotonic() >= next_checkpoint
                if checkpoint is not None and due:
                    taken = time.monotonic()
                    await checkpoint()
                    # a year's state takes seconds to store: at most CHECKPOINT_SHARE of the replay goes to it
                    next_checkpoint = time.monotonic() + (1 / CHECKPOINT_SHARE - 1) * (time.monotonic() - taken)
            learned += await self.sync()
            # what the batches left pending, before the first decision needs it
            await learning.thread.run(lambda: learning.learner.settle())  # noqa: PLW0108 - looked up holding the lock
        finally:
            progress.finish()
        if progress.total:
            log.info("caught up with the log: %d entries learned in %.1f s", learned, time.monotonic() - began)
        return learned

    def _replayed(self, entries: int) -> None:
        """Count a batch of replayed log entries; say how far the replay is every REPLAY_REPORT_S."""
        progress = self.learning.progress
        progress.replayed(entries)
        now = time.monotonic()
        if now - self._replay_reported >= REPLAY_REPORT_S:
            self._replay_reported = now
            share = 100 * progress.done / max(progress.total, 1)
            log.info("replaying the log: %d of %d entries (%.0f%%)", progress.done, progress.total, share)


def _nothing(result: object) -> None:
    """What the event loop does once a batch of ratings or ends is learned: nothing of its own."""
