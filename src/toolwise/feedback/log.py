"""The execution log: every recorded tool execution, its ratings, the sessions' episodes, and the
per-tool summaries kept with them (`toolstats`). Reads walk `(namespace, seq)`; every read flushes
first, so it sees everything recorded before it."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    Integer,
    Select,
    cast,
    delete,
    func,
    insert,
    select,
    tuple_,
    update,
)

from toolwise.feedback import toolstats
from toolwise.feedback.errors import InvalidOutcomeError, InvalidRatingError, UnknownExecutionError
from toolwise.feedback.export import execution_chunks, previous_rating, within
from toolwise.feedback.records import (
    OUTCOMES,
    ActionSummary,
    Episode,
    EpisodeEnd,
    Execution,
    LogColumns,
    LogEntry,
    Rating,
    RatingEvent,
    ToolMetrics,
    TrendBucket,
    utcnow,
)
from toolwise.feedback.rows import episode_from_row, episode_values, execution_from_row, rating_from_row
from toolwise.feedback.schema import EpisodeRow, ExecutionRow, RatingRow, ToolStatsRow

if TYPE_CHECKING:
    from toolwise.feedback.service import FeedbackService


class ExecutionLog:
    """`FeedbackService.log`: executions go through the service's group commit (the hot path);
    ratings, rewards and episodes are committed on its write path before the call returns."""

    def __init__(self, service: FeedbackService) -> None:
        self._service = service
        # get_tool_metrics' answers per namespace, kept while the summaries cannot have changed: every
        # local write that touches them bumps `_generation` once committed, and so does a `heads` probe
        # (the sync tick's) that finds the shared log moved (another instance wrote).
        self._generation = 0
        self._metrics: dict[str, tuple[int, tuple[ToolMetrics, ...]]] = {}
        self._heads: dict[str, tuple[int, int, int]] = {}

    def summaries_changed(self) -> None:
        """The per-tool summaries may have changed (a commit that touched them): cached metrics are stale."""
        self._generation += 1

    async def record_execution(self, execution: Execution, *, force: bool = False) -> str:
        """Queue one execution for group commit and return its id; waits only when the queue is full
        (at most `store_timeout_s`, then `StoreUnavailableError`; `force`: never, for shutdown).
        The service takes ownership of `execution` (and its arguments): do not mutate it afterwards."""
        await self._service.writer.put(execution, force=force)
        return execution.id

    async def add_rating(
        self, execution_id: str, rating: int, comment: str | None = None, *, instance: str | None = None
    ) -> RatingEvent:
        """Commit a 1..5 rating of a recorded execution; returns it with the execution and the rating
        it replaces (the execution's latest earlier rating, if any)."""
        if isinstance(rating, bool) or not isinstance(rating, int) or not 1 <= rating <= 5:
            raise InvalidRatingError(rating)
        execution = await self.get_execution(execution_id)
        if execution is None:
            raise UnknownExecutionError(execution_id)
        created_at, comment = utcnow(), self._service.rows.free_text(comment)

        def write(conn: Connection) -> tuple[int | None, int]:
            previous = conn.scalar(
                select(RatingRow.rating)
                .where(RatingRow.execution_id == execution_id)
                .order_by(RatingRow.id.desc())
                .limit(1)
            )
            rating_id = conn.execute(
                insert(RatingRow)
                .values(
                    execution_id=execution_id, rating=rating, comment=comment, created_at=created_at, instance=instance
                )
                .returning(RatingRow.id)
            ).scalar_one()
            toolstats.add_ratings(conn, [(execution.namespace, execution.tool, rating)])
            return previous, rating_id

        try:
            previous, rating_id = await self._service.write(write)
        finally:
            self.summaries_changed()
        stored = Rating(execution_id, rating, comment, created_at, rating_id, instance)
        return RatingEvent(stored, execution, previous)

    async def set_reward(self, execution_id: str, reward: float) -> None:
        """Commit the reward of an execution (recomputed after a rating)."""
        await self._service.flush()

        def write(conn: Connection) -> bool:
            e = ExecutionRow
            row = conn.execute(select(e.namespace, e.tool, e.reward).where(e.id == execution_id)).first()
            if row is None:
                return False
            conn.execute(update(e).where(e.id == execution_id).values(reward=reward))
            toolstats.change_reward(conn, row.namespace, row.tool, row.reward, reward)
            return True

        try:
            found = await self._service.write(write)
        finally:
            self.summaries_changed()
        if not found:
            raise UnknownExecutionError(execution_id)

    async def record_episode(self, episode: Episode) -> Episode:
        """Commit a finished episode (a session's ordered tool sequence and its outcome) after every
        execution queued before it, its last call's included: a sync that reads the end finds its step.
        Returns it with its place among the log's episode ends."""
        if episode.outcome not in OUTCOMES:
            raise InvalidOutcomeError(episode.outcome)
        await self._service.flush()
        seq = await self._service.write(
            lambda conn: conn.execute(
                insert(EpisodeRow).values(episode_values(episode)).returning(EpisodeRow.seq)
            ).scalar_one()
        )
        return replace(episode, seq=seq)

    # -- read path ---------------------------------------------------------------------------------

    async def get_execution(self, execution_id: str) -> Execution | None:
        rows = await self._executions(select(ExecutionRow).where(ExecutionRow.id == execution_id))
        return rows[0] if rows else None

    async def get_recent_executions(
        self,
        limit: int = 50,
        *,
        namespace: str = "default",
    ) -> list[Execution]:
        """The newest `limit` executions of a namespace, newest first."""
        query = select(ExecutionRow).where(ExecutionRow.namespace == namespace)
        return await self._executions(query.order_by(ExecutionRow.seq.desc()).limit(limit))

    async def latest_of(self, tool: str, *, since: datetime, namespace: str = "default") -> Execution | None:
        """The newest execution of `tool` that finished at or after `since` (rating a call by its tool's
        name when the caller's session holds none)."""
        e = ExecutionRow
        query = select(e).where(e.namespace == namespace, e.tool == tool, e.finished_at >= since)
        rows = await self._executions(query.order_by(e.seq.desc()).limit(1))
        return rows[0] if rows else None

    async def _executions(self, query: Select[ExecutionRow]) -> list[Execution]:
        await self._service.flush()
        async with self._service.engine.connect() as conn:
            result = await conn.execute(query)
            return [execution_from_row(row._mapping) for row in result]

    async def get_episodes(self, *, namespace: str = "default", limit: int = 100) -> list[Episode]:
        async with self._service.engine.connect() as conn:
            result = await conn.execute(
                select(EpisodeRow)
                .where(EpisodeRow.namespace == namespace)
                .order_by(EpisodeRow.ended_at.desc())
                .limit(limit)
            )
            return [episode_from_row(r._mapping) for r in result]

    async def iter_episodes(
        self,
        *,
        namespace: str = "default",
        since: datetime | None = None,
        until: datetime | None = None,
        batch: int = 1000,
    ) -> AsyncGenerator[list[Episode], None]:
        """Episodes that ended in [since, until), newest first, in batches walking (namespace, ended_at,
        id) backwards: an export in bounded memory however many sessions the log holds."""
        e = EpisodeRow
        query = (
            select(e)
            .where(e.namespace == namespace, *within(e.ended_at, since, until))
            .order_by(e.ended_at.desc(), e.id.desc())
            .limit(batch)
        )
        page = query
        while True:
            async with self._service.engine.connect() as conn:
                rows = (await conn.execute(page)).all()
            if rows:
                yield [episode_from_row(r._mapping) for r in rows]
            if len(rows) < batch:
                return
            page = query.where(tuple_(e.ended_at, e.id) < tuple_(rows[-1].ended_at, rows[-1].id))

    async def iter_episode_ends(
        self, *, namespace: str = "default", after_seq: int = 0, batch: int = 1000
    ) -> AsyncGenerator[list[EpisodeEnd], None]:
        """The episode ends after `after_seq`, oldest first, each with its last call's whole record (a
        sync learns it as terminal), in batches walking (namespace, seq)."""
        while True:
            ends = await self._episode_ends(EpisodeRow.namespace == namespace, EpisodeRow.seq > after_seq, limit=batch)
            if ends:
                yield ends
            if len(ends) < batch:
                return
            after_seq = ends[-1].seq

    async def episode_ends_after(self, execution_ids: list[str], *, namespace: str = "default") -> list[EpisodeEnd]:
        """The episode ends whose last call is one of these executions (at most a batch of `iter_log`),
        oldest first: a replay learns each right after its step."""
        if not execution_ids:
            return []
        return await self._episode_ends(EpisodeRow.namespace == namespace, EpisodeRow.last_execution.in_(execution_ids))

    async def _episode_ends(self, *where: ColumnElement[bool], limit: int | None = None) -> list[EpisodeEnd]:
        p = EpisodeRow
        end = [p.seq.label("end_seq"), p.id.label("end_id"), p.instance.label("end_instance")]
        columns = [*end, *ExecutionRow.__table__.columns]
        query = (
            select(*columns)
            .outerjoin(ExecutionRow, ExecutionRow.id == p.last_execution)
            .where(*where)
            .order_by(p.seq)
            .limit(limit)
        )
        async with self._service.engine.connect() as conn:
            rows = [row._mapping for row in await conn.execute(query)]
        return [
            EpisodeEnd(
                r["end_seq"], r["end_id"], r["end_instance"], execution_from_row(r) if r["id"] is not None else None
            )
            for r in rows
        ]

    async def iter_executions(
        self, *, namespace: str = "default", after_seq: int = 0, since: datetime | None = None, batch: int = 1000
    ) -> AsyncGenerator[list[Execution], None]:
        """Every execution after `after_seq` (and finished since `since`), oldest first, in batches
        (replay, sync, export, inspection)."""
        scope = [ExecutionRow.namespace == namespace]
        if since is not None:
            scope.append(ExecutionRow.finished_at >= since)
        while True:
            rows = await self._executions(
                select(ExecutionRow).where(*scope, ExecutionRow.seq > after_seq).order_by(ExecutionRow.seq).limit(batch)
            )
            if rows:
                yield rows
            if len(rows) < batch:  # the log's end (as of now)
                return
            after_seq = rows[-1].seq  # type: ignore[assignment]  # a record read back always has its seq

    async def iter_execution_lines(
        self,
        *,
        namespace: str = "default",
        since: datetime | None = None,
        until: datetime | None = None,
        batch: int = 5000,
    ) -> AsyncGenerator[list[str], None]:
        """Executions finished in [since, until) as JSON objects (one string each, built by the database),
        oldest first, in batches walking (namespace, seq): an export in bounded memory."""
        await self._service.flush()
        chunks = execution_chunks(self._service.engine, namespace=namespace, since=since, until=until, batch=batch)
        async for _, text in chunks:
            yield text.decode().splitlines()

    async def trend(
        self, *, namespace: str = "default", since: datetime | None = None, buckets: int = 12
    ) -> list[TrendBucket]:
        """Calls, mean reward, success rate and exploration rate (among calls that followed a
        recommendation) per equal slice of time between the first and last execution since `since`,
        aggregated by the database (one grouped query)."""
        e = ExecutionRow
        scope = [e.namespace == namespace] + ([e.finished_at >= since] if since is not None else [])
        await self._service.flush()
        async with self._service.engine.connect() as conn:
            span = select(func.min(e.finished_at), func.max(e.finished_at)).where(*scope)
            first, last = (await conn.execute(span)).one()
            if first is None:
                return []
            first, last = _as_utc(first), _as_utc(last)
            width = max((last - first).total_seconds(), 1e-3) * (1 + 1e-9) / buckets
            index: ColumnElement[int]
            offset: ColumnElement[Any]  # seconds since `first`
            if conn.dialect.name == "postgresql":
                offset = func.extract("epoch", e.finished_at - first)
                index = func.least(cast(func.floor(offset / width), Integer), buckets - 1)
            else:  # SQLite keeps naive UTC text; CAST truncates (offsets are ≥ 0)
                start = func.julianday(first.strftime("%Y-%m-%d %H:%M:%S.%f"))
                offset = (func.julianday(e.finished_at) - start) * 86400
                index = func.min(cast(offset / width, Integer), buckets - 1)
            bucket = index.label("bucket")
            query = (
                select(
                    bucket,
                    func.count(),
                    func.avg(e.reward),
                    func.avg(cast(e.success, Float)),
                    func.avg(cast(e.explored, Float)),
                )
                .where(*scope)
                .group_by(bucket)
                .order_by(bucket)
            )
            rows = (await conn.execute(query)).all()
        return [
            TrendBucket(
                first + timedelta(seconds=width * b),
                first + timedelta(seconds=width * (b + 1)),
                int(n),
                _float(reward),
                float(success),
                _float(explored),
            )
            for b, n, reward, success, explored in rows
        ]

    async def iter_log(
        self, *, namespace: str = "default", after_seq: int = 0, batch: int = 1000
    ) -> AsyncGenerator[list[LogEntry], None]:
        """The log's entries after `after_seq`, oldest first, in batches (syncing: whole records of the
        entries that need them come from `executions_by_seq`)."""
        await self._service.flush()
        columns = [getattr(ExecutionRow, f.name) for f in fields(LogEntry)]
        while True:
            async with self._service.engine.connect() as conn:
                result = await conn.execute(
                    select(*columns)
                    .where(ExecutionRow.namespace == namespace, ExecutionRow.seq > after_seq)
                    .order_by(ExecutionRow.seq)
                    .limit(batch)
                )
                entries = [LogEntry(*row) for row in result]
            if entries:
                yield entries
            if len(entries) < batch:
                return
            after_seq = entries[-1].seq

    async def iter_log_columns(
        self, *, namespace: str = "default", after_seq: int = 0, batch: int = 1000
    ) -> AsyncGenerator[LogColumns, None]:
        """The log's entries after `after_seq` with what learning them needs, oldest first, in batches
        of columns (a replay: one read a batch, where `iter_log` then `executions_by_seq` take two and
        build an object a row)."""
        await self._service.flush()
        columns = [getattr(ExecutionRow, f.name) for f in fields(LogColumns)]
        while True:
            async with self._service.engine.connect() as conn:
                rows = (
                    await conn.execute(
                        select(*columns)
                        .where(ExecutionRow.namespace == namespace, ExecutionRow.seq > after_seq)
                        .order_by(ExecutionRow.seq)
                        .limit(batch)
                    )
                ).all()
            if rows:
                yield LogColumns(*zip(*rows, strict=True))
            if len(rows) < batch:
                return
            after_seq = rows[-1][0]

    async def session_query(self, session_id: str, *, namespace: str = "default", before_seq: int | None) -> str | None:
        """The newest query recorded in a session before `before_seq` (a query is stored once, on the
        call that followed its recommendation; the session's later calls share it)."""
        e = ExecutionRow
        query = select(e.query).where(e.namespace == namespace, e.session_id == session_id, e.query.is_not(None))
        if before_seq is not None:
            query = query.where(e.seq < before_seq)
        await self._service.flush()
        async with self._service.engine.connect() as conn:
            return await conn.scalar(query.order_by(e.seq.desc()).limit(1))

    async def executions_by_seq(self, seqs: list[int]) -> list[Execution]:
        """Whole records of the given log positions, oldest first (at most a batch of `iter_log`)."""
        if not seqs:
            return []
        return await self._executions(select(ExecutionRow).where(ExecutionRow.seq.in_(seqs)).order_by(ExecutionRow.seq))

    async def iter_rating_events(
        self, *, namespace: str = "default", after_id: int = 0, batch: int = 1000
    ) -> AsyncGenerator[list[RatingEvent], None]:
        """Every rating after `after_id`, oldest first, with its execution and the rating it replaced.
        Each batch is a range of rating ids read first and joined to its executions by key: a join
        driven from the executions side walks the whole namespace for every batch."""
        r = RatingRow.__table__
        while True:
            page = select(r).where(r.c.id > after_id).order_by(r.c.id).limit(batch).subquery("page")
            previous = previous_rating(page)
            query = (
                select(
                    ExecutionRow.__table__,
                    *(c.label(f"rating_{c.key}") for c in page.c),
                    previous.label("previous_rating"),
                )
                .select_from(page)
                .join(ExecutionRow, ExecutionRow.id == page.c.execution_id)
                .where(ExecutionRow.namespace == namespace)
                .order_by(page.c.id)
            )
            async with self._service.engine.connect() as conn:
                rows = (await conn.execute(query)).all()
                last = await conn.scalar(select(func.max(page.c.id)))  # the range read, other namespaces' too
            if rows:
                events = []
                for row in rows:
                    values = row._mapping
                    rating = rating_from_row({c.key: values[f"rating_{c.key}"] for c in r.columns})
                    events.append(RatingEvent(rating, execution_from_row(values), values["previous_rating"]))
                yield events
            if last is None:
                return
            after_id = last

    async def action_summary(self, namespace: str = "default") -> list[ActionSummary]:
        """Per tool: calls, mean reward, success rate and calls that followed an exploratory
        recommendation, most called first, from the summaries maintained with the log: O(tools)."""
        t = ToolStatsRow
        query = (
            select(t.tool, t.calls, t.successes, t.reward_sum, t.rewarded, t.explored)
            .where(t.namespace == namespace)
            .order_by(t.calls.desc(), t.tool)
        )
        await self._service.flush()
        async with self._service.engine.connect() as conn:
            return toolstats.actions(await conn.execute(query))

    async def high_water(self, namespace: str = "default") -> tuple[int, int]:
        """The newest execution seq and rating id of a namespace (0 when there are none)."""
        await self._service.flush()
        async with self._service.engine.connect() as conn:
            seq = await conn.scalar(select(func.max(ExecutionRow.seq)).where(ExecutionRow.namespace == namespace))
            rating = await conn.scalar(
                select(func.max(RatingRow.id))
                .join(ExecutionRow, ExecutionRow.id == RatingRow.execution_id)
                .where(ExecutionRow.namespace == namespace)
            )
        return int(seq or 0), int(rating or 0)

    async def heads(self, namespace: str = "default") -> tuple[int, int, int]:
        """The newest execution seq of a namespace, the newest rating id of any namespace and the newest
        episode end of the namespace (0 when none): one statement of three index probes, so a sync that
        finds nothing new costs O(log n)."""
        await self._service.flush()
        seq = select(func.max(ExecutionRow.seq)).where(ExecutionRow.namespace == namespace).scalar_subquery()
        rating = select(func.max(RatingRow.id)).scalar_subquery()
        episode = select(func.max(EpisodeRow.seq)).where(EpisodeRow.namespace == namespace).scalar_subquery()
        async with self._service.engine.connect() as conn:
            row = (await conn.execute(select(seq, rating, episode))).one()
        heads = int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)
        if self._heads.get(namespace) != heads:  # the log moved, maybe by another instance's hand
            self._heads[namespace] = heads
            self.summaries_changed()
        return heads

    async def count_executions(self, namespace: str = "default", *, after_seq: int = 0) -> int:
        """Executions of a namespace: the sum of its per-tool summaries (O(tools)), or with `after_seq`
        a count of the index range after it."""
        await self._service.flush()
        if after_seq:
            e = ExecutionRow
            query = select(func.count()).select_from(e).where(e.namespace == namespace, e.seq > after_seq)
        else:
            query = select(func.sum(ToolStatsRow.calls)).where(ToolStatsRow.namespace == namespace)
        async with self._service.engine.connect() as conn:
            return int(await conn.scalar(query) or 0)

    async def namespaces(self) -> list[str]:
        """The namespaces that have executions, from the per-tool summaries (O(tools))."""
        t = ToolStatsRow
        query = select(t.namespace).where(t.calls > 0).distinct().order_by(t.namespace)
        async with self._service.engine.connect() as conn:
            return [name for (name,) in await conn.execute(query)]

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

        await self._service.flush()
        deleted = 0
        try:
            while pruned := await self._service.write(prune_batch):
                deleted += pruned
        finally:
            self.summaries_changed()
        return deleted

    async def get_tool_metrics(
        self, tool: str | None = None, *, namespace: str = "default", limit: int | None = None
    ) -> list[ToolMetrics]:
        """Metrics for every tool (or one) by name, or (`limit`) the `limit` most-called, most called
        first; from the summaries maintained with the log: O(tools), not O(executions); p95 within
        `toolstats.RELATIVE_ACCURACY` of the exact nearest-rank value. Served from memory while the
        summaries cannot have changed (no commit here since, no movement of the log seen by `heads`):
        another instance's writes show once a `heads` probe (the server's sync tick) has seen them."""
        every = await self._all_metrics(namespace)
        if tool is not None:
            return [m for m in every if m.tool == tool]
        if limit is None:
            return list(every)
        # a stable sort: tools called as often keep the database's order of names (its collation)
        return sorted(every, key=lambda m: -m.calls)[:limit]

    async def _all_metrics(self, namespace: str) -> tuple[ToolMetrics, ...]:
        """Every tool's metrics by name, read again only after the summaries may have changed."""
        await self._service.flush()
        generation = self._generation  # taken before the read: a commit during it makes the answer stale
        cached = self._metrics.get(namespace)
        if cached is not None and cached[0] == generation:
            return cached[1]
        t = ToolStatsRow
        query = select(*toolstats.METRICS_COLUMNS).where(t.namespace == namespace, t.calls > 0).order_by(t.tool)
        async with self._service.engine.connect() as conn:
            every = tuple(toolstats.metrics(await conn.execute(query)))
        self._metrics[namespace] = (generation, every)
        return every

    async def mean_reward(self, namespace: str = "default") -> float | None:
        """The mean reward per recorded call that has one, from the per-tool summaries: O(tools)."""
        t = ToolStatsRow
        await self._service.flush()
        async with self._service.engine.connect() as conn:
            return toolstats.mean_reward(
                await conn.execute(select(t.reward_sum, t.rewarded).where(t.namespace == namespace))
            )


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


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _as_utc(value: datetime | str) -> datetime:
    """max() over a UTCDateTime column loses the type on SQLite; parse and mark it UTC again."""
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
