"""FeedbackService: the durable record of every tool execution, the ratings and the episodes.

It owns the engine and the single writer task; nothing else opens sessions behind its back.
Executions go through group commit (they are the hot path); ratings, rewards and episodes are
committed before the call returns (they are rare and a user action). Every read flushes first, so it
sees everything recorded before it.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import fields
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from alembic.util.exc import CommandError as AlembicError
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
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from toolwise.feedback import toolstats
from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN, argument_digest, canonical_json, redact, redact_text
from toolwise.feedback.bulk import CompiledInsert
from toolwise.feedback.engine import (
    BatchWriter,
    check_sqlite,
    create_engine,
    create_private,
    data_dir,
    default_database_url,
    sqlite_path,
)
from toolwise.feedback.errors import (
    DatabaseUnusableError,
    InvalidOutcomeError,
    InvalidRatingError,
    ServiceNotStartedError,
    UnknownExecutionError,
    describe_database_error,
)
from toolwise.feedback.export import execution_chunks
from toolwise.feedback.metrics import tool_metrics_query
from toolwise.feedback.migrate import upgrade
from toolwise.feedback.records import (
    OUTCOMES,
    ActionSummary,
    Episode,
    Execution,
    InstanceStatus,
    LogEntry,
    Rating,
    RatingEvent,
    SnapshotRecord,
    ToolMetrics,
    TrendBucket,
    WriterStats,
    utcnow,
)
from toolwise.feedback.schema import (
    EpisodeRow,
    ExecutionRow,
    InstanceRow,
    RatingRow,
    SecretRow,
    SnapshotRow,
    ToolStatsRow,
    UTCDateTime,
)
from toolwise.feedback.writer import GroupCommitWriter

log = logging.getLogger(__name__)
R = TypeVar("R")

_EXECUTION_COLUMNS = tuple(c.key for c in ExecutionRow.__table__.columns if c.key != "seq")
_Prepared = tuple[list[Any], list[tuple[str, str, bool, float, datetime]]]  # insert parameters, summary inputs


class FeedbackService:
    def __init__(
        self,
        url: str | None = None,
        *,
        store_arguments: bool = False,
        store_queries: bool = True,
        redact_pattern: str = DEFAULT_REDACT_PATTERN,
        batch_size: int = 256,
        flush_interval_ms: float = 20.0,
        max_queue: int = 10_000,
        busy_timeout_s: float = 5.0,
        synchronous: str = "FULL",
        dead_letter_path: Path | None = None,
        store_timeout_s: float = 10.0,
    ) -> None:
        self.url = url or default_database_url()
        self._store_arguments = store_arguments
        self._store_queries = store_queries  # off: recommend_tool queries and rating comments are not stored
        self._salt = b""  # the database's argument-digest salt, read at start
        self._redact = re.compile(redact_pattern, re.IGNORECASE)
        self._engine_options = {"busy_timeout_s": busy_timeout_s, "synchronous": synchronous}
        self._writer_options = {
            "batch_size": batch_size,
            "flush_interval_s": flush_interval_ms / 1000,
            "max_queue": max_queue,
            "wait_s": store_timeout_s,
        }
        self._close_timeout_s = store_timeout_s
        db_file = sqlite_path(self.url)
        folder = db_file.parent if db_file else data_dir()
        self.dead_letter_path = dead_letter_path or folder / "toolwise-dead-letter.jsonl"
        self._engine: AsyncEngine | None = None
        self._batches: BatchWriter | None = None  # SQLite files: the executions' own writing thread
        self._writer: GroupCommitWriter[Execution, _Prepared] | None = None
        self._insert: CompiledInsert | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the database and bring its schema up to date; a database that cannot be used raises
        `DatabaseUnusableError` naming it and what is wrong (one message, not a driver traceback)."""
        try:
            if (path := sqlite_path(self.url)) is not None:
                check_sqlite(path)
            self._engine = create_engine(self.url, **self._engine_options)  # type: ignore[arg-type]
            await upgrade(self._engine)
            async with self._engine.connect() as conn:
                salt = await conn.scalar(select(SecretRow.value).where(SecretRow.name == "argument_salt"))
        except (SQLAlchemyError, sqlite3.Error, OSError, AlembicError) as exc:
            if self._engine is not None:
                await self._engine.dispose()
                self._engine = None
            where = sqlite_path(self.url) or _safe_url(self.url)
            raise DatabaseUnusableError(f"{where}: {describe_database_error(exc)}") from exc
        if salt is None:
            raise DatabaseUnusableError(f"{_safe_url(self.url)}: the argument salt is missing from table 'secrets'")
        self._salt = bytes.fromhex(salt)
        if sqlite_path(self.url) is not None:
            self._batches = BatchWriter(self.url, **self._engine_options)  # type: ignore[arg-type]
        self._insert = CompiledInsert(ExecutionRow.__table__, _EXECUTION_COLUMNS, self._engine.dialect)
        self._writer = GroupCommitWriter(self._rows, self._insert_rows, self._dead_letter, **self._writer_options)
        self._writer.start()
        log.info("feedback store ready at %s", _safe_url(self.url))

    async def aclose(self) -> None:
        """Write everything queued, then release the database. A database that takes nothing for
        `store_timeout_s` gets the rest dead-lettered rather than a shutdown that never ends."""
        if self._writer is not None:
            await self._writer.aclose(self._close_timeout_s)
        if self._batches is not None:
            await self._batches.aclose()
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = self._writer = self._batches = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise ServiceNotStartedError
        return self._engine

    @property
    def stats(self) -> WriterStats:
        if self._writer is None:
            raise ServiceNotStartedError
        return self._writer.stats

    # -- write path --------------------------------------------------------------------------------

    async def record_execution(self, execution: Execution, *, force: bool = False) -> str:
        """Queue one execution for group commit and return its id; waits only when the queue is full
        (at most `store_timeout_s`, then `StoreUnavailableError`; `force`: never, for shutdown).
        The service takes ownership of `execution` (and its arguments): do not mutate it afterwards."""
        if self._writer is None:
            raise ServiceNotStartedError
        await self._writer.put(execution, force=force)
        return execution.id

    async def flush(self) -> None:
        """Return once every execution recorded before this call is committed."""
        if self._writer is None:
            raise ServiceNotStartedError
        await self._writer.flush()

    def _row(self, e: Execution) -> tuple[Any, ...]:
        """The execution as a tuple in `_EXECUTION_COLUMNS` order, digest computed, secrets redacted
        (runs in the writer task, off the path of the call)."""
        keep = self._store_arguments and e.arguments is not None
        stored = redact(e.arguments, self._redact) if keep else None
        return (
            e.id,
            e.namespace,
            e.session_id,
            e.tool,
            e.server,
            e.argument_digest or self.argument_digest(e.arguments),
            stored,
            e.context_hash,
            self._free_text(e.query),
            e.previous_tool,
            e.position,
            e.decision_id,
            e.propensity,
            e.success,
            e.error_type,
            None if e.error_message is None else redact_text(e.error_message),
            e.latency_ms,
            e.result_size,
            e.reward,
            e.started_at,
            e.finished_at,
            e.instance,
            e.explored,
        )

    def argument_digest(self, arguments: Mapping[str, Any] | None) -> str:
        """The digest stored for these arguments in this database (salted with its own salt)."""
        return argument_digest(arguments, self._salt)

    def _free_text(self, text: str | None) -> str | None:
        """A query or comment as stored: redacted, or not at all with `store_queries` off."""
        return redact_text(text) if text and self._store_queries else None

    def _rows(self, batch: list[Execution]) -> _Prepared:
        """Driver-ready parameters for a batch and what its tools' summaries need (runs on the event
        loop while the previous batch commits; the summaries are folded in on the database's side)."""
        if self._insert is None:
            raise ServiceNotStartedError
        summary = [(e.namespace, e.tool, e.success, e.latency_ms, e.finished_at) for e in batch]
        return self._insert.params([self._row(e) for e in batch]), summary

    async def _insert_rows(self, prepared: _Prepared) -> None:
        """Insert a batch and fold it into its tools' summaries, in one transaction."""
        if self._insert is None:
            raise ServiceNotStartedError
        params, summary = prepared

        def summarise(conn: Connection) -> None:
            toolstats.apply(conn, toolstats.deltas(summary))

        if self._batches is not None:
            await self._batches.execute(self._insert.sql, params, summarise)
            return
        async with self.engine.begin() as conn:
            await conn.exec_driver_sql(self._insert.sql, params)
            await conn.run_sync(summarise)

    def _dead_letter(self, execution: Execution, exc: BaseException) -> None:
        """Last resort for a record the database refuses: keep it on disk, loudly."""
        row = dict(zip(_EXECUTION_COLUMNS, self._row(execution), strict=True))
        line = canonical_json({"error": repr(exc), "execution": row})
        self.dead_letter_path.parent.mkdir(parents=True, exist_ok=True)
        create_private(self.dead_letter_path)
        with self.dead_letter_path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")
        log.error("execution %s written to %s", execution.id, self.dead_letter_path)

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
        created_at, comment = utcnow(), self._free_text(comment)

        def write(conn: Connection) -> tuple[int | None, int]:
            previous = conn.scalar(
                select(RatingRow.rating)
                .where(RatingRow.execution_id == execution_id)
                .order_by(RatingRow.id.desc())
                .limit(1)
            )
            result = conn.execute(
                insert(RatingRow).values(
                    execution_id=execution_id, rating=rating, comment=comment, created_at=created_at, instance=instance
                )
            )
            toolstats.add_ratings(conn, [(execution.namespace, execution.tool, rating)])
            return previous, int(result.inserted_primary_key[0])

        previous, rating_id = await self._transaction(write)
        stored = Rating(execution_id, rating, comment, created_at, rating_id, instance)
        return RatingEvent(stored, execution, previous)

    async def _transaction(self, work: Callable[[Connection], R]) -> R:
        """Run `work` in one write transaction. On an SQLite file it runs on the executions' writing
        thread and connection: two connections writing one file wait on each other's lock (SQLite's
        busy handler sleeps up to 100 ms a try), which stalled group commit behind every rating."""
        if self._batches is not None:
            return await self._batches.run(work)
        async with self.engine.begin() as conn:
            return await conn.run_sync(work)

    async def set_reward(self, execution_id: str, reward: float) -> None:
        """Commit the reward of an execution (recomputed after a rating)."""
        await self.flush()
        rowcount = await self._transaction(
            lambda conn: (
                conn.execute(update(ExecutionRow).where(ExecutionRow.id == execution_id).values(reward=reward)).rowcount
            )
        )
        if rowcount == 0:
            raise UnknownExecutionError(execution_id)

    async def record_episode(self, episode: Episode) -> Episode:
        """Commit a finished episode (a session's ordered tool sequence and its outcome)."""
        if episode.outcome not in OUTCOMES:
            raise InvalidOutcomeError(episode.outcome)
        await self._transaction(
            lambda conn: conn.execute(
                insert(EpisodeRow).values(
                    id=episode.id,
                    namespace=episode.namespace,
                    session_id=episode.session_id,
                    tools=list(episode.tools),
                    total_reward=episode.total_reward,
                    outcome=episode.outcome,
                    started_at=episode.started_at,
                    ended_at=episode.ended_at,
                )
            )
        )
        return episode

    # -- read path ---------------------------------------------------------------------------------

    async def get_execution(self, execution_id: str) -> Execution | None:
        rows = await self._executions(select(ExecutionRow).where(ExecutionRow.id == execution_id))
        return rows[0] if rows else None

    async def get_recent_executions(
        self,
        limit: int = 50,
        *,
        namespace: str = "default",
        tool: str | None = None,
        session_id: str | None = None,
        after_seq: int | None = None,
    ) -> list[Execution]:
        """Newest first; `after_seq` limits to executions logged after that sequence number."""
        query = select(ExecutionRow).where(ExecutionRow.namespace == namespace)
        if tool is not None:
            query = query.where(ExecutionRow.tool == tool)
        if session_id is not None:
            query = query.where(ExecutionRow.session_id == session_id)
        if after_seq is not None:
            query = query.where(ExecutionRow.seq > after_seq)
        return await self._executions(query.order_by(ExecutionRow.seq.desc()).limit(limit))

    async def _executions(self, query: Select[tuple[ExecutionRow]]) -> list[Execution]:
        await self.flush()
        async with self.engine.connect() as conn:
            result = await conn.execute(query)
            return [_execution(row._mapping) for row in result]

    async def get_ratings(self, execution_id: str) -> list[Rating]:
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(RatingRow).where(RatingRow.execution_id == execution_id).order_by(RatingRow.id)
            )
            return [_rating(r._mapping) for r in result]

    async def get_episodes(self, *, namespace: str = "default", limit: int = 100) -> list[Episode]:
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(EpisodeRow)
                .where(EpisodeRow.namespace == namespace)
                .order_by(EpisodeRow.ended_at.desc())
                .limit(limit)
            )
            return [
                Episode(
                    r.session_id,
                    list(r.tools),
                    r.total_reward,
                    r.outcome,  # type: ignore[arg-type]
                    r.started_at,
                    r.ended_at,
                    r.namespace,
                    r.id,
                )
                for r in result
            ]

    async def iter_executions(
        self, *, namespace: str = "default", after_seq: int = 0, since: datetime | None = None, batch: int = 1000
    ) -> AsyncIterator[list[Execution]]:
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
            after_seq = rows[-1].seq  # type: ignore[assignment]

    async def iter_execution_lines(
        self,
        *,
        namespace: str = "default",
        since: datetime | None = None,
        until: datetime | None = None,
        batch: int = 5000,
    ) -> AsyncIterator[list[str]]:
        """Executions finished in [since, until) as JSON objects (one string each, built by the database),
        oldest first, in batches walking (namespace, seq): an export in bounded memory."""
        await self.flush()
        async for _, text in execution_chunks(self.engine, namespace=namespace, since=since, until=until, batch=batch):
            yield text.splitlines()

    async def trend(
        self, *, namespace: str = "default", since: datetime | None = None, buckets: int = 12
    ) -> list[TrendBucket]:
        """Calls, mean reward, success rate and exploration rate (among calls that followed a
        recommendation) per equal slice of time between the first and last execution since `since`,
        aggregated by the database (one grouped query)."""
        e = ExecutionRow
        scope = [e.namespace == namespace] + ([e.finished_at >= since] if since is not None else [])
        await self.flush()
        async with self.engine.connect() as conn:
            span = select(func.min(e.finished_at), func.max(e.finished_at)).where(*scope)
            first, last = (await conn.execute(span)).one()
            if first is None:
                return []
            first, last = _as_utc(first), _as_utc(last)
            width = max((last - first).total_seconds(), 1e-3) * (1 + 1e-9) / buckets
            index: ColumnElement[int]
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
    ) -> AsyncIterator[list[LogEntry]]:
        """The log's entries after `after_seq`, oldest first, in batches (syncing: whole records of the
        entries that need them come from `executions_by_seq`)."""
        await self.flush()
        columns = [getattr(ExecutionRow, f.name) for f in fields(LogEntry)]
        while True:
            async with self.engine.connect() as conn:
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

    async def session_query(self, session_id: str, *, namespace: str = "default", before_seq: int | None) -> str | None:
        """The newest query recorded in a session before `before_seq` (a query is stored once, on the
        call that followed its recommendation; the session's later calls share it)."""
        e = ExecutionRow
        query = select(e.query).where(e.namespace == namespace, e.session_id == session_id, e.query.is_not(None))
        if before_seq is not None:
            query = query.where(e.seq < before_seq)
        await self.flush()
        async with self.engine.connect() as conn:
            return await conn.scalar(query.order_by(e.seq.desc()).limit(1))

    async def executions_by_seq(self, seqs: list[int]) -> list[Execution]:
        """Whole records of the given log positions, oldest first (at most a batch of `iter_log`)."""
        if not seqs:
            return []
        return await self._executions(select(ExecutionRow).where(ExecutionRow.seq.in_(seqs)).order_by(ExecutionRow.seq))

    async def iter_rating_events(
        self, *, namespace: str = "default", after_id: int = 0, batch: int = 1000
    ) -> AsyncIterator[list[RatingEvent]]:
        """Every rating after `after_id`, oldest first, with its execution and the rating it replaced."""
        earlier = RatingRow.__table__.alias("earlier")
        previous = (
            select(earlier.c.rating)
            .where(earlier.c.execution_id == RatingRow.execution_id, earlier.c.id < RatingRow.id)
            .order_by(earlier.c.id.desc())
            .limit(1)
            .scalar_subquery()
        )
        while True:
            query = (
                select(
                    ExecutionRow.__table__,
                    *(c.label(f"rating_{c.key}") for c in RatingRow.__table__.columns),
                    previous.label("previous_rating"),
                )
                .join(ExecutionRow, ExecutionRow.id == RatingRow.execution_id)
                .where(ExecutionRow.namespace == namespace, RatingRow.id > after_id)
                .order_by(RatingRow.id)
                .limit(batch)
            )
            async with self.engine.connect() as conn:
                rows = (await conn.execute(query)).all()
            if not rows:
                return
            events = []
            for row in rows:
                values = row._mapping
                rating = _rating({c.key: values[f"rating_{c.key}"] for c in RatingRow.__table__.columns})
                events.append(RatingEvent(rating, _execution(values), values["previous_rating"]))
            yield events
            if len(rows) < batch:
                return
            after_id = events[-1].rating.id  # type: ignore[assignment]

    async def action_summary(self, namespace: str = "default") -> list[ActionSummary]:
        """Per tool: calls, mean reward, success rate and calls that followed an exploratory
        recommendation, most called first (one grouped query)."""
        e = ExecutionRow
        query = (
            select(
                e.tool,
                func.count().label("calls"),
                func.avg(e.reward).label("mean_reward"),
                func.avg(cast(cast(e.success, Integer), Float)).label("success_rate"),
                func.sum(cast(e.explored, Integer)).label("explored"),
            )
            .where(e.namespace == namespace)
            .group_by(e.tool)
            .order_by(func.count().desc(), e.tool)
        )
        await self.flush()
        async with self.engine.connect() as conn:
            return [
                ActionSummary(r.tool, r.calls, _float(r.mean_reward), float(r.success_rate), int(r.explored or 0))
                for r in await conn.execute(query)
            ]

    async def high_water(self, namespace: str = "default") -> tuple[int, int]:
        """The newest execution seq and rating id of a namespace (0 when there are none)."""
        await self.flush()
        async with self.engine.connect() as conn:
            seq = await conn.scalar(select(func.max(ExecutionRow.seq)).where(ExecutionRow.namespace == namespace))
            rating = await conn.scalar(
                select(func.max(RatingRow.id))
                .join(ExecutionRow, ExecutionRow.id == RatingRow.execution_id)
                .where(ExecutionRow.namespace == namespace)
            )
        return int(seq or 0), int(rating or 0)

    async def log_heads(self, namespace: str = "default") -> tuple[int, int]:
        """The newest execution seq of a namespace and the newest rating id of any namespace (0 when
        none): one statement of two index probes, so a sync that finds nothing new costs O(log n)."""
        await self.flush()
        seq = select(func.max(ExecutionRow.seq)).where(ExecutionRow.namespace == namespace).scalar_subquery()
        rating = select(func.max(RatingRow.id)).scalar_subquery()
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(seq, rating))).one()
        return int(row[0] or 0), int(row[1] or 0)

    async def count_executions(self, namespace: str | None = "default", *, after_seq: int = 0) -> int:
        await self.flush()
        query = select(func.count()).select_from(ExecutionRow)
        if namespace is not None:
            query = query.where(ExecutionRow.namespace == namespace)
        if after_seq:
            query = query.where(ExecutionRow.seq > after_seq)
        async with self.engine.connect() as conn:
            return int(await conn.scalar(query) or 0)

    async def namespaces(self) -> list[str]:
        async with self.engine.connect() as conn:
            result = await conn.execute(select(ExecutionRow.namespace).distinct().order_by(ExecutionRow.namespace))
            return [name for (name,) in result]

    async def prune(self, before: datetime, *, namespace: str = "default", max_seq: int, batch: int = 1000) -> int:
        """Delete executions (and their ratings) finished before `before` whose seq is at most `max_seq`
        (their effect is kept in a snapshot), `batch` at a time; returns how many were deleted."""
        await self.flush()
        deleted = 0
        while True:
            async with self.engine.begin() as conn:
                ids = (
                    (
                        await conn.execute(
                            select(ExecutionRow.id)
                            .where(
                                ExecutionRow.namespace == namespace,
                                ExecutionRow.finished_at < before,
                                ExecutionRow.seq <= max_seq,
                            )
                            .order_by(ExecutionRow.seq)
                            .limit(batch)
                        )
                    )
                    .scalars()
                    .all()
                )
                if not ids:
                    return deleted
                await conn.run_sync(_forget, ids)
                await conn.execute(delete(RatingRow).where(RatingRow.execution_id.in_(ids)))
                await conn.execute(delete(ExecutionRow).where(ExecutionRow.id.in_(ids)))
            deleted += len(ids)

    # -- snapshots ---------------------------------------------------------------------------------

    async def save_snapshot(self, snapshot: SnapshotRecord, *, keep: int) -> int:
        """Store a snapshot and drop all but the newest `keep` of its namespace; returns its id."""
        if keep < 1:
            raise ValueError(f"keep must be ≥ 1, got {keep}")
        async with self.engine.begin() as conn:
            result = await conn.execute(
                insert(SnapshotRow).values(
                    namespace=snapshot.namespace,
                    version=snapshot.version,
                    policy=snapshot.policy,
                    source=snapshot.source,
                    created_at=snapshot.created_at,
                    sample_count=snapshot.sample_count,
                    covered=snapshot.covered,
                    sha256=snapshot.sha256,
                    signature=snapshot.signature,
                    payload=snapshot.payload,
                )
            )
            snapshot_id = int(result.inserted_primary_key[0])
            kept = (
                select(SnapshotRow.id)
                .where(SnapshotRow.namespace == snapshot.namespace)
                .order_by(SnapshotRow.id.desc())
                .limit(keep)
            )
            await conn.execute(
                delete(SnapshotRow).where(SnapshotRow.namespace == snapshot.namespace, SnapshotRow.id.not_in(kept))
            )
        return snapshot_id

    async def list_snapshots(self, namespace: str = "default") -> list[SnapshotRecord]:
        """Stored snapshots of a namespace, newest first, without their payloads."""
        columns = [c for c in SnapshotRow.__table__.columns if c.key != "payload"]
        async with self.engine.connect() as conn:
            result = await conn.execute(
                select(*columns).where(SnapshotRow.namespace == namespace).order_by(SnapshotRow.id.desc())
            )
            return [SnapshotRecord(**row._mapping) for row in result]

    async def get_snapshot(
        self, snapshot_id: int | None = None, *, namespace: str = "default"
    ) -> SnapshotRecord | None:
        """One snapshot with its payload: by id, or the newest of the namespace."""
        query = select(SnapshotRow.__table__).where(SnapshotRow.namespace == namespace)
        query = query.where(SnapshotRow.id == snapshot_id) if snapshot_id is not None else query
        async with self.engine.connect() as conn:
            row = (await conn.execute(query.order_by(SnapshotRow.id.desc()).limit(1))).first()
        return None if row is None else SnapshotRecord(**row._mapping)

    async def delete_snapshot(self, snapshot_id: int) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(delete(SnapshotRow).where(SnapshotRow.id == snapshot_id))

    # -- running instances -------------------------------------------------------------------------

    async def heartbeat(self, status: InstanceStatus) -> None:
        """Insert or refresh a running instance's row."""
        values = {
            "namespace": status.namespace,
            "host": status.host,
            "pid": status.pid,
            "started_at": status.started_at,
            "heartbeat_at": status.heartbeat_at,
            "stopped_at": status.stopped_at,
            "status": status.status,
        }
        async with self.engine.begin() as conn:
            result = await conn.execute(update(InstanceRow).where(InstanceRow.id == status.id).values(**values))
            if result.rowcount == 0:
                await conn.execute(insert(InstanceRow).values(id=status.id, **values))

    async def get_instances(self, namespace: str | None = None) -> list[InstanceStatus]:
        query = select(InstanceRow).order_by(InstanceRow.heartbeat_at.desc())
        if namespace is not None:
            query = query.where(InstanceRow.namespace == namespace)
        async with self.engine.connect() as conn:
            result = await conn.execute(query)
            return [
                InstanceStatus(
                    r.id, r.namespace, r.host, r.pid, r.started_at, r.heartbeat_at, dict(r.status), r.stopped_at
                )
                for r in result
            ]

    async def get_tool_metrics(self, tool: str | None = None, *, namespace: str = "default") -> list[ToolMetrics]:
        """Metrics for every tool (or one), from the summaries maintained with the log: O(tools), not
        O(executions); p95 within `toolstats.RELATIVE_ACCURACY` of the exact nearest-rank value."""
        await self.flush()
        columns = [c for c in ToolStatsRow.__table__.columns if c.key != "latency_counts"]
        query = select(*columns).where(ToolStatsRow.namespace == namespace).order_by(ToolStatsRow.tool)
        if tool is not None:
            query = query.where(ToolStatsRow.tool == tool)
        async with self.engine.connect() as conn:
            return toolstats.metrics(await conn.execute(query))

    async def recompute_tool_metrics(self, tool: str | None = None, *, namespace: str = "default") -> list[ToolMetrics]:
        """The same metrics recomputed from every execution (O(executions), exact p95): a check on the
        maintained summaries, not for a per-call path."""
        await self.flush()
        async with self.engine.connect() as conn:
            result = await conn.execute(tool_metrics_query(namespace, tool))
            return [
                ToolMetrics(
                    tool=name,
                    calls=calls,
                    success_rate=float(success_rate),
                    avg_latency_ms=float(avg_latency),
                    p95_latency_ms=float(p95),
                    avg_rating=None if avg_rating is None else float(avg_rating),
                    ratings=int(ratings),
                    last_used=_as_utc(last_used),
                )
                for name, calls, success_rate, avg_latency, p95, avg_rating, ratings, last_used in result
            ]


def _forget(conn: Connection, ids: list[str]) -> None:
    """Take executions about to be pruned (and their ratings) out of their tools' summaries."""
    e = ExecutionRow
    rows = conn.execute(select(e.namespace, e.tool, e.success, e.latency_ms, e.finished_at).where(e.id.in_(ids))).all()
    toolstats.apply(conn, toolstats.deltas(tuple(r) for r in rows), sign=-1)
    rated = conn.execute(
        select(e.namespace, e.tool, RatingRow.rating)
        .join(RatingRow, RatingRow.execution_id == e.id)
        .where(e.id.in_(ids))
    ).all()
    toolstats.add_ratings(conn, [tuple(r) for r in rated], sign=-1)


def _execution(row: Mapping[str, Any]) -> Execution:
    return Execution(**{key: row[key] for key in (*_EXECUTION_COLUMNS, "seq")})


def _rating(row: Mapping[str, Any]) -> Rating:
    return Rating(row["execution_id"], row["rating"], row["comment"], row["created_at"], row["id"], row["instance"])


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _as_utc(value: datetime | str) -> datetime:
    """max() over a UTCDateTime column loses the type on SQLite; parse and mark it UTC again."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return UTCDateTime().process_result_value(value, None)  # type: ignore[arg-type,return-value]


def _safe_url(url: str) -> str:
    """The URL without its password, for logs."""
    return make_url(url).render_as_string(hide_password=True)
