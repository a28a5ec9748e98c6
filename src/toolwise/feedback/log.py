"""The execution log's write path: every recorded tool execution, its ratings, the sessions' episodes,
and the per-tool summaries kept with them (`toolstats`). What replay, sync and rating read is
`reads.LogReads`; what admins read, `reports.LogReports`. Every read flushes first, so it sees everything
recorded before it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from sqlalchemy import (
    Connection,
    Select,
    delete,
    insert,
    select,
    update,
)

from toolwise.feedback import toolstats
from toolwise.feedback.database import Database
from toolwise.feedback.errors import InvalidOutcomeError, InvalidRatingError, UnknownExecutionError
from toolwise.feedback.reads import Generation, LogReads
from toolwise.feedback.records import (
    OUTCOMES,
    Episode,
    Execution,
    Rating,
    RatingEvent,
    utcnow,
)
from toolwise.feedback.rows import ExecutionRows, episode_from_row, episode_values
from toolwise.feedback.schema import EpisodeRow, ExecutionRow, RatingRow


class ExecutionLog:
    """`FeedbackService.log`: executions go through the database's group commit (the hot path);
    ratings, rewards and episodes are committed on its write path before the call returns."""

    def __init__(self, database: Database, rows: ExecutionRows, reads: LogReads, generation: Generation) -> None:
        self._database = database
        self._rows = rows  # the database's salt and what is kept of free text
        self._reads = reads
        self._generation = generation

    def summaries_changed(self) -> None:
        """The per-tool summaries may have changed (a commit that touched them): cached metrics are stale."""
        self._generation.bump()

    async def record_execution(self, execution: Execution, *, force: bool = False) -> str:
        """Queue one execution for group commit and return its id; waits only when the queue is full
        (at most `store_timeout_s`, then `StoreUnavailableError`; `force`: never, for shutdown).
        The log takes ownership of `execution` (and its arguments): do not mutate it afterwards."""
        await self._database.record(execution, force=force)
        return execution.id

    async def add_rating(
        self,
        execution_id: str,
        rating: int,
        comment: str | None = None,
        *,
        instance: str | None = None,
        created_at: datetime | None = None,
        retried: bool = False,
        rerate: Callable[[float, int, int | None], float] | None = None,
        unrated: Callable[[Execution], float] | None = None,
    ) -> RatingEvent:
        """Commit a 1..5 rating of a recorded execution; returns it with the execution and the rating
        it replaces (the execution's latest earlier rating, if any). `retried`: a retry of this rating
        (the same `instance` and `created_at`) whose try may have committed though it reported an error
        (a connection lost after the commit): a row of that try is the rating, not stored or counted again.
        `rerate(reward, rating, previous)`: the execution's stored reward as the rating leaves it, moved in
        the same commit, so that a reader of the log never finds a rating its reward does not include.
        `unrated(execution)`: the reward, before any rating, of an execution never rewarded (not learned
        from: a cancelled call), which `rerate` then moves: its first rating commits it a reward, never
        leaving a rated call without one (a crash before a later write would have)."""
        if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= 5:
            raise InvalidRatingError(rating)
        execution = await self._reads.get_execution(execution_id)
        if execution is None:
            raise UnknownExecutionError(execution_id)
        created_at, comment = created_at or utcnow(), self._rows.free_text(comment)
        base = unrated(execution) if unrated is not None and execution.reward is None else None  # a stored reward stays

        def write(conn: Connection) -> tuple[int | None, int, float | None, int | None]:
            """The rating replaced, the rating's id, the execution's reward and the rating that reward includes.
            The execution's row is claimed first (a write of it as it is): a rating of it committing meanwhile,
            another instance's or this one's, is waited for and read, not overwritten with a reward and a
            previous rating read before it (PostgreSQL's row lock; SQLite's write lock, which a read alone
            does not take)."""
            e = ExecutionRow
            conn.execute(update(e).where(e.id == execution_id).values(reward=e.reward))
            reward = conn.scalar(select(e.reward).where(e.id == execution_id))
            if retried:
                r = RatingRow
                tried = select(r.id).where(
                    r.execution_id == execution_id,
                    r.instance == instance,
                    r.created_at == created_at,
                    r.rating == rating,
                )
                if (rating_id := conn.scalar(tried)) is not None:  # its reward moved with it
                    previous = conn.scalar(_latest(execution_id).where(RatingRow.id < rating_id))
                    return previous, rating_id, reward, conn.scalar(_latest(execution_id))
            previous = conn.scalar(_latest(execution_id))
            was, rewarded = reward, previous
            if was is None and base is not None:  # never rewarded: the rating gives it its first reward
                reward, rewarded = base, None
            rating_id = conn.execute(
                insert(RatingRow)
                .values(
                    execution_id=execution_id, rating=rating, comment=comment, created_at=created_at, instance=instance
                )
                .returning(RatingRow.id)
            ).scalar_one()
            toolstats.add_ratings(conn, [(execution.namespace, execution.tool, rating)])
            if rerate is not None and reward is not None:
                moved = rerate(reward, rating, rewarded)
                conn.execute(update(ExecutionRow).where(ExecutionRow.id == execution_id).values(reward=moved))
                toolstats.change_reward(conn, execution.namespace, execution.tool, was, moved)
            return previous, rating_id, reward, rewarded

        try:
            previous, rating_id, reward, rewarded = await self._database.write(write)
        finally:
            self.summaries_changed()
        stored = Rating(execution_id, rating, comment, created_at, rating_id, instance)
        return RatingEvent(stored, replace(execution, reward=reward), previous, rewarded)

    async def record_episode(self, episode: Episode) -> Episode:
        """Commit a finished episode (a session's ordered tool sequence and its outcome) after every
        execution queued before it, its last call's included: a sync that reads the end finds its step.
        Returns it with its place among the log's episode ends. Idempotent on the episode's id: a retry
        of a recording that committed and still reported an error (a connection lost after the commit)
        returns the episode as first recorded instead of failing on the id forever."""
        if episode.outcome not in OUTCOMES:
            raise InvalidOutcomeError(episode.outcome)
        await self._database.flush()

        def write(conn: Connection) -> Episode:
            stored = conn.execute(select(EpisodeRow).where(EpisodeRow.id == episode.id)).mappings().first()
            if stored is None:
                row = insert(EpisodeRow).values(episode_values(episode)).returning(EpisodeRow.seq)
                return replace(episode, seq=conn.execute(row).scalar_one())
            recorded = episode_from_row(stored)
            if (recorded.session_id, recorded.last_execution) != (episode.session_id, episode.last_execution):
                raise ValueError(
                    f"episode id {episode.id!r} is recorded for session {recorded.session_id!r} ending after "
                    f"{recorded.last_execution!r}, not {episode.session_id!r} ending after {episode.last_execution!r}"
                )
            return recorded

        return await self._database.write(write)

    async def prune(self, before: datetime, *, namespace: str = "default", max_seq: int, batch: int = 1000) -> int:
        """Delete executions (and their ratings) finished before `before` whose seq is at most `max_seq`
        (their effect is kept in a snapshot), `batch` at a time; returns how many were deleted."""
        e = ExecutionRow
        doomed = (
            select(e.id)
            .where(e.namespace == namespace, e.finished_at < before, e.seq <= max_seq)
            .order_by(e.seq)
            .limit(batch)
        )

        def prune_batch(conn: Connection) -> int:
            ids = list(conn.scalars(doomed).all())
            if ids:
                _forget(conn, ids)
                conn.execute(delete(RatingRow).where(RatingRow.execution_id.in_(ids)))
                conn.execute(delete(ExecutionRow).where(ExecutionRow.id.in_(ids)))
            return len(ids)

        await self._database.flush()
        deleted = 0
        try:
            while pruned := await self._database.write(prune_batch):
                deleted += pruned
        finally:
            self.summaries_changed()
        return deleted


def _latest(execution_id: str) -> Select[int]:
    """An execution's latest rating (narrowed by the caller: the latest before one)."""
    return select(RatingRow.rating).where(RatingRow.execution_id == execution_id).order_by(RatingRow.id.desc()).limit(1)


def _forget(conn: Connection, ids: list[str]) -> None:
    """Take executions about to be pruned (and their ratings) out of their tools' summaries."""
    e = ExecutionRow
    done = select(e.namespace, e.tool, e.success, e.latency_ms, e.finished_at, e.reward, e.explored)
    done = done.where(e.id.in_(ids))
    toolstats.apply(conn, toolstats.deltas(conn.execute(done).all()), sign=-1)
    rated = conn.execute(
        select(e.namespace, e.tool, RatingRow.rating)
        .join(RatingRow, RatingRow.execution_id == e.id)
        .where(e.id.in_(ids))
    ).all()
    toolstats.add_ratings(conn, rated, sign=-1)
