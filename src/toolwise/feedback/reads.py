"""What replay, sync and rating read from the execution log: one execution, the log in `(namespace,
seq)` order (as entries, as columns), ratings and episode ends after a watermark, and the heads a sync
probes. Every read flushes first, so it sees everything recorded before it."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TypeVar

from sqlalchemy import (
    ColumnElement,
    Select,
    func,
    or_,
    select,
)

from toolwise.feedback.database import Database
from toolwise.feedback.export import previous_rating
from toolwise.feedback.records import (
    EpisodeEnd,
    Execution,
    LogColumns,
    LogEntry,
    RatingEvent,
)
from toolwise.feedback.rows import execution_from_row, rating_from_row
from toolwise.feedback.schema import EpisodeRow, ExecutionRow, RatingRow, ToolStatsRow


@dataclass(slots=True, frozen=True)
class RatingPage:
    """A range of rating ids read (`LogReads.iter_rating_events`): the namespace's ratings, and the ids in it of
    other namespaces' (one sequence numbers every namespace's: a watermark steps over those)."""

    events: list[RatingEvent]
    others: list[int]


class Generation:
    """Bumped whenever the per-tool summaries may have changed (a local commit that touched them, or a
    `heads` probe that found the shared log moved): `LogReports.get_tool_metrics` answers from memory
    while it holds."""

    def __init__(self) -> None:
        self.value = 0

    def bump(self) -> None:
        self.value += 1


class LogReads:
    """`FeedbackService.reads`."""

    def __init__(self, database: Database, generation: Generation) -> None:
        self._database = database
        self._generation = generation  # bumped by a `heads` probe that finds the shared log moved
        self._heads: dict[str, tuple[int, int, int]] = {}

    async def get_execution(self, execution_id: str) -> Execution | None:
        rows = await executions(self._database, select(ExecutionRow).where(ExecutionRow.id == execution_id))
        return rows[0] if rows else None

    async def latest_of(
        self, tool: str, *, since: datetime, namespace: str = "default", owner: str | None = None
    ) -> Execution | None:
        """The newest execution of `tool` that finished at or after `since` (rating a call by its tool's
        name when the caller's session holds none); with `owner`, only among that client's calls (its
        session ids: learning/sessions.py's `owns`)."""
        e = ExecutionRow
        # The log's first seq among the window's calls bounds the walk of the tool's calls to the window
        # (the same rows): unbounded, it read every call the tool ever had. `seq + 0`: SQLite's min()
        # otherwise walks the seq key from the log's start to the window instead of the finished_at range.
        first = select(func.min(e.seq + 0)).where(e.finished_at >= since).scalar_subquery()
        query = select(e).where(e.namespace == namespace, e.tool == tool, e.finished_at >= since, e.seq >= first)
        if owner is not None:
            query = query.where(or_(e.session_id == owner, e.session_id.startswith(f"{owner}/", autoescape=True)))
        rows = await executions(self._database, query.order_by(e.seq.desc()).limit(1))
        return rows[0] if rows else None

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
        async with self._database.engine.connect() as conn:
            rows = [row._mapping for row in await conn.execute(query)]
        return [
            EpisodeEnd(
                r["end_seq"], r["end_id"], r["end_instance"], execution_from_row(r) if r["id"] is not None else None
            )
            for r in rows
        ]

    async def iter_log(
        self, *, namespace: str = "default", after_seq: int = 0, batch: int = 1000
    ) -> AsyncGenerator[list[LogEntry], None]:
        """The log's entries after `after_seq`, oldest first, in batches (syncing: whole records of the
        entries that need them come from `executions_by_seq`)."""
        await self._database.flush()
        columns = [getattr(ExecutionRow, f.name) for f in fields(LogEntry)]
        while True:
            async with self._database.engine.connect() as conn:
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
        async for columns in column_batches(self._database, LogColumns, namespace, after_seq, batch):
            yield columns

    async def session_query(self, session_id: str, *, namespace: str = "default", before_seq: int | None) -> str | None:
        """The newest query recorded in a session before `before_seq` (a query is stored once, on the
        call that followed its recommendation; the session's later calls share it)."""
        e = ExecutionRow
        query = select(e.query).where(e.namespace == namespace, e.session_id == session_id, e.query.is_not(None))
        if before_seq is not None:
            query = query.where(e.seq < before_seq)
        await self._database.flush()
        async with self._database.engine.connect() as conn:
            return await conn.scalar(query.order_by(e.seq.desc()).limit(1))

    async def failed_before(
        self, session_id: str, position: int, *, namespace: str = "default", before_seq: int
    ) -> bool:
        """Whether the session's call just before `position` failed (the newest such call before `before_seq`:
        a session name reused starts again at 0); False at its first call, or when the log lacks it."""
        if position < 1:
            return False
        e = ExecutionRow
        query = select(e.success).where(
            e.namespace == namespace, e.session_id == session_id, e.position == position - 1, e.seq < before_seq
        )
        await self._database.flush()
        async with self._database.engine.connect() as conn:
            success = await conn.scalar(query.order_by(e.seq.desc()).limit(1))
        return success is not None and not success

    async def executions_by_seq(self, seqs: list[int]) -> list[Execution]:
        """Whole records of the given log positions, oldest first (at most a batch of `iter_log`)."""
        if not seqs:
            return []
        return await executions(
            self._database, select(ExecutionRow).where(ExecutionRow.seq.in_(seqs)).order_by(ExecutionRow.seq)
        )

    async def iter_rating_events(
        self, *, namespace: str = "default", after_id: int = 0, batch: int = 1000
    ) -> AsyncGenerator[RatingPage, None]:
        """Every rating after `after_id`, oldest first, with its execution, the rating it replaced and the one
        the execution's stored reward includes, and the ids of the other namespaces' ratings in between. Each
        batch is a range of rating ids read first and joined to its executions by key: a join driven from the
        executions side walks the whole namespace for every batch."""
        r = RatingRow.__table__
        while True:
            page = select(r).where(r.c.id > after_id).order_by(r.c.id).limit(batch).subquery("page")
            elsewhere = (  # another namespace's for good (a rating's execution keeps its namespace)
                select(page.c.id)
                .join(ExecutionRow, ExecutionRow.id == page.c.execution_id)
                .where(ExecutionRow.namespace != namespace)
                .order_by(page.c.id)
            )
            query = (
                select(
                    ExecutionRow.__table__,
                    *(c.label(f"rating_{c.key}") for c in page.c),
                    previous_rating(page).label("previous_rating"),
                    previous_rating(page, latest=True).label("rewarded_rating"),
                )
                .select_from(page)
                .join(ExecutionRow, ExecutionRow.id == page.c.execution_id)
                .where(ExecutionRow.namespace == namespace)
                .order_by(page.c.id)
            )
            async with self._database.engine.connect() as conn:
                rows = (await conn.execute(query)).all()
                last = await conn.scalar(select(func.max(page.c.id)))  # the range read, other namespaces' too
                others = list(await conn.scalars(elsewhere))
            events = []
            for row in rows:
                values = row._mapping
                rating = rating_from_row({c.key: values[f"rating_{c.key}"] for c in r.columns})
                execution = execution_from_row(values)
                events.append(RatingEvent(rating, execution, values["previous_rating"], values["rewarded_rating"]))
            if events or others:
                yield RatingPage(events, others)
            if last is None:
                return
            after_id = last

    async def high_water(self, namespace: str = "default") -> tuple[int, int]:
        """The newest execution seq and rating id of a namespace (0 when there are none)."""
        await self._database.flush()
        async with self._database.engine.connect() as conn:
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
        await self._database.flush()
        seq = select(func.max(ExecutionRow.seq)).where(ExecutionRow.namespace == namespace).scalar_subquery()
        rating = select(func.max(RatingRow.id)).scalar_subquery()
        episode = select(func.max(EpisodeRow.seq)).where(EpisodeRow.namespace == namespace).scalar_subquery()
        async with self._database.engine.connect() as conn:
            row = (await conn.execute(select(seq, rating, episode))).one()
        heads = int(row[0] or 0), int(row[1] or 0), int(row[2] or 0)
        if self._heads.get(namespace) != heads:  # the log moved, maybe by another instance's hand
            self._heads[namespace] = heads
            self._generation.bump()
        return heads

    async def count_executions(self, namespace: str = "default", *, after_seq: int = 0) -> int:
        """Executions of a namespace: the sum of its per-tool summaries (O(tools)), or with `after_seq`
        a count of the index range after it."""
        await self._database.flush()
        if after_seq:
            e = ExecutionRow
            query = select(func.count()).select_from(e).where(e.namespace == namespace, e.seq > after_seq)
        else:
            query = select(func.sum(ToolStatsRow.calls)).where(ToolStatsRow.namespace == namespace)
        async with self._database.engine.connect() as conn:
            return int(await conn.scalar(query) or 0)


async def executions(database: Database, query: Select[ExecutionRow]) -> list[Execution]:
    """The executions a query selects, once what was recorded before it is committed."""
    await database.flush()
    async with database.engine.connect() as conn:
        result = await conn.execute(query)
        return [execution_from_row(row._mapping) for row in result]


Columns = TypeVar("Columns")


async def column_batches(
    database: Database, shape: type[Columns], namespace: str, after_seq: int, batch: int
) -> AsyncGenerator[Columns, None]:
    """The namespace's executions after `after_seq`, oldest first, in batches of columns: `shape` is a
    dataclass whose fields name execution columns, `seq` first (no object a row)."""
    await database.flush()
    columns = [getattr(ExecutionRow, f.name) for f in fields(shape)]  # type: ignore[arg-type]
    while True:
        async with database.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(*columns)
                    .where(ExecutionRow.namespace == namespace, ExecutionRow.seq > after_seq)
                    .order_by(ExecutionRow.seq)
                    .limit(batch)
                )
            ).all()
        if rows:
            yield shape(*zip(*rows, strict=True))
        if len(rows) < batch:
            return
        after_seq = rows[-1][0]
