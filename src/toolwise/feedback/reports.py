"""What admins read from the execution log: recent executions and episodes, exports, the reward trend,
per-tool actions and metrics (from the summaries kept with the log: O(tools))."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Float,
    Integer,
    cast,
    func,
    literal,
    select,
    tuple_,
)

from toolwise.feedback import toolstats
from toolwise.feedback.database import Database
from toolwise.feedback.export import execution_chunks, within
from toolwise.feedback.reads import Generation, executions
from toolwise.feedback.records import (
    ActionSummary,
    Episode,
    Execution,
    ToolMetrics,
    TrendBucket,
)
from toolwise.feedback.rows import episode_from_row
from toolwise.feedback.schema import EpisodeRow, ExecutionRow, ToolStatsRow, UTCDateTime


class LogReports:
    """`FeedbackService.reports`."""

    def __init__(self, database: Database, generation: Generation) -> None:
        self._database = database
        # get_tool_metrics' answers per namespace, kept while the summaries cannot have changed (`Generation`)
        self._generation = generation
        self._metrics: dict[str, tuple[int, tuple[ToolMetrics, ...]]] = {}

    async def get_recent_executions(
        self,
        limit: int = 50,
        *,
        namespace: str = "default",
    ) -> list[Execution]:
        """The newest `limit` executions of a namespace, newest first."""
        query = select(ExecutionRow).where(ExecutionRow.namespace == namespace)
        return await executions(self._database, query.order_by(ExecutionRow.seq.desc()).limit(limit))

    async def get_episodes(self, *, namespace: str = "default", limit: int = 100) -> list[Episode]:
        async with self._database.engine.connect() as conn:
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
            async with self._database.engine.connect() as conn:
                rows = (await conn.execute(page)).all()
            if rows:
                yield [episode_from_row(r._mapping) for r in rows]
            if len(rows) < batch:
                return
            # the time bound as the column's type (a bare datetime binds in another text form on SQLite)
            last = tuple_(literal(rows[-1].ended_at, UTCDateTime()), rows[-1].id)
            page = query.where(tuple_(e.ended_at, e.id) < last)

    async def iter_executions(
        self, *, namespace: str = "default", after_seq: int = 0, since: datetime | None = None, batch: int = 1000
    ) -> AsyncGenerator[list[Execution], None]:
        """Every execution after `after_seq` (and finished since `since`), oldest first, in batches
        (replay, sync, export, inspection)."""
        scope = [ExecutionRow.namespace == namespace]
        if since is not None:
            scope.append(ExecutionRow.finished_at >= since)
        while True:
            rows = await executions(
                self._database,
                select(ExecutionRow)
                .where(*scope, ExecutionRow.seq > after_seq)
                .order_by(ExecutionRow.seq)
                .limit(batch),
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
        await self._database.flush()
        chunks = execution_chunks(self._database.engine, namespace=namespace, since=since, until=until, batch=batch)
        async for _, text in chunks:  # each line ends in "\n"; `splitlines` also splits at U+2028 inside a string
            yield text[:-1].decode().split("\n")

    async def trend(
        self, *, namespace: str = "default", since: datetime | None = None, buckets: int = 12, after_seq: int = 0
    ) -> list[TrendBucket]:
        """Calls, mean reward, success rate, exploration rate (among calls that followed a
        recommendation) and how often the tool called was the one recommended, per equal slice of time
        between the first and last execution since `since` (and after `after_seq`: a bound on the rows
        read), aggregated by the database (one grouped query)."""
        e = ExecutionRow
        scope = [e.namespace == namespace] + ([e.finished_at >= since] if since is not None else [])
        scope += [e.seq > after_seq] if after_seq else []
        await self._database.flush()
        async with self._database.engine.connect() as conn:
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
                    func.avg(cast(cast(e.success, Integer), Float)),  # PostgreSQL casts a boolean to integer only
                    func.avg(cast(cast(e.explored, Integer), Float)),
                    func.count(e.decision_id),  # calls made after a recommendation
                    func.count(e.propensity),  # … of the tool recommended (a propensity is kept only then)
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
                int(recommended),
                int(followed),
            )
            for b, n, reward, success, explored, recommended, followed in rows
        ]

    async def first_seq_since(self, since: datetime) -> int | None:
        """The log position of the first execution (of any namespace) that finished at or after `since`,
        or None: one probe of the time index. A trend bounded by it (`after_seq`) walks `(namespace, seq)`
        over the window alone, where SQLite's planner would otherwise walk the whole namespace; the log is
        appended in about the order calls finish, so it misses at most calls recorded out of order
        across the window's edge."""
        e = ExecutionRow
        await self._database.flush()
        async with self._database.engine.connect() as conn:
            return await conn.scalar(select(e.seq).where(e.finished_at >= since).order_by(e.finished_at).limit(1))

    async def action_summary(self, namespace: str = "default") -> list[ActionSummary]:
        """Per tool: calls, mean reward, success rate and calls that followed an exploratory
        recommendation, most called first, from the summaries maintained with the log: O(tools)."""
        t = ToolStatsRow
        query = (
            select(t.tool, t.calls, t.successes, t.reward_sum, t.rewarded, t.explored)
            .where(t.namespace == namespace)
            .order_by(t.calls.desc(), t.tool)
        )
        await self._database.flush()
        async with self._database.engine.connect() as conn:
            return toolstats.actions(await conn.execute(query))

    async def namespaces(self) -> list[str]:
        """The namespaces that have executions, from the per-tool summaries (O(tools))."""
        t = ToolStatsRow
        query = select(t.namespace).where(t.calls > 0).distinct().order_by(t.namespace)
        async with self._database.engine.connect() as conn:
            return [name for (name,) in await conn.execute(query)]

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
        await self._database.flush()
        generation = self._generation.value  # taken before the read: a commit during it makes the answer stale
        cached = self._metrics.get(namespace)
        if cached is not None and cached[0] == generation:
            return cached[1]
        t = ToolStatsRow
        query = select(*toolstats.METRICS_COLUMNS).where(t.namespace == namespace, t.calls > 0).order_by(t.tool)
        async with self._database.engine.connect() as conn:
            every = tuple(toolstats.metrics(await conn.execute(query)))
        self._metrics[namespace] = (generation, every)
        return every

    async def mean_reward(self, namespace: str = "default") -> float | None:
        """The mean reward per recorded call that has one, from the per-tool summaries: O(tools)."""
        t = ToolStatsRow
        await self._database.flush()
        async with self._database.engine.connect() as conn:
            return toolstats.mean_reward(
                await conn.execute(select(t.reward_sum, t.rewarded).where(t.namespace == namespace))
            )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _as_utc(value: datetime | str) -> datetime:
    """max() over a UTCDateTime column loses the type on SQLite; parse and mark it UTC again."""
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
