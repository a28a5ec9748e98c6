"""The execution log as JSON Lines, built by the database in large chunks: an export in bounded memory.

Each chunk is one query that both encodes its rows (`json_object` / `json_build_object`) and joins
them (`group_concat` / `string_agg`) in log order, so Python handles one byte string per chunk instead
of one row object per execution: the read-and-encode path runs at the database's speed, `READERS`
chunks at once (the JSON building is nearly all of an export's CPU). PostgreSQL encodes in its own
server processes, one a connection; an SQLite file is encoded in worker processes of ours
(`export_workers`, running `chunk_worker`), because connections in one process contend on SQLite's allocator.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncGenerator, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ColumnElement,
    LargeBinary,
    ScalarSelect,
    Select,
    SQLColumnExpression,
    Subquery,
    Text,
    bindparam,
    case,
    cast,
    func,
    literal,
    select,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.ext.asyncio import AsyncEngine

from toolwise.feedback.engine import sqlite_path
from toolwise.feedback.export_workers import Workers
from toolwise.feedback.schema import ExecutionRow, RatingRow, UTCDateTime

CHUNK_ROWS = 2_000  # rows a chunk: ~1.4 MB of text at ~700 bytes a line
READERS = 2  # chunks encoded at once (one core each): memory stays a few chunks
LAST_SEQ = 2**63 - 1  # the upper bound of the log's last batch


def json_object(
    dialect: str,
    kind: str | None = None,
    columns: Iterable[ColumnElement[Any]] = ExecutionRow.__table__.columns,
    **extra: ColumnElement[Any],
) -> ColumnElement[str]:
    """A row as one JSON object built by the database (an export never decodes a row in Python):
    first `"type": kind` when given, then `columns` (an execution's by default) and `extra`. Booleans
    as true/false, times as ISO 8601 UTC, stored JSON as JSON. SQLite keeps JSON as text, booleans as
    0/1 and times as "YYYY-MM-DD HH:MM:SS[.ffffff]+00:00"; stored JSON that SQLite's JSON refuses
    (bare NaN, from before it was stored as a string) goes out as its text, a JSON string."""
    items: list[Any] = [literal("type"), literal(kind)] if kind is not None else []
    for column in columns:
        value: Any = column
        if dialect != "postgresql":
            # the cheapest forms measured (the output is byte-identical at 1M rows): a constant json()
            # is evaluated once
            if isinstance(column.type, JSON):
                # a row written before NaN and ±infinity were stored as strings holds the bare words,
                # which json() refuses for the whole query: its stored text goes out as a string
                value = case((func.json_valid(column), func.json(column)), else_=column)
            elif isinstance(column.type, Boolean):
                value = case((column == 1, func.json("true")), (column == 0, func.json("false")))
            elif isinstance(column.type, UTCDateTime):  # every stored time ends in +00:00 (SQLiteUTCText)
                value = func.replace(column, " ", "T")
        items += [literal(column.key), value]
    for key, value in extra.items():
        items += [literal(key), value]
    if dialect == "postgresql":
        return cast(func.json_build_object(*items), Text)
    return func.json_object(*items)


def _joined(dialect: str, line: ColumnElement[str], order: ColumnElement[int]) -> ColumnElement[bytes]:
    """The lines of an ordered, limited subquery joined by newlines, as bytes. SQLite feeds an
    aggregate from such a subquery in its order (the subquery runs as a co-routine); PostgreSQL is
    told the order. SQLite hands a BLOB over as it is; PostgreSQL's bytea is the UTF-8 encoding."""
    if dialect == "postgresql":
        joined = func.string_agg(line, aggregate_order_by(literal("\n"), order))
        return func.convert_to(joined, literal("UTF8"), type_=LargeBinary)
    return cast(func.group_concat(line, "\n"), LargeBinary)


def within(
    column: SQLColumnExpression[datetime], since: datetime | None, until: datetime | None
) -> list[ColumnElement[bool]]:
    """The conditions that `column` falls in [since, until); none for an open end."""
    return [*([column >= since] if since is not None else []), *([column < until] if until is not None else [])]


async def execution_chunks(
    engine: AsyncEngine,
    *,
    namespace: str = "default",
    since: datetime | None = None,
    until: datetime | None = None,
    batch: int = CHUNK_ROWS,
    kind: str | None = None,
    readers: int = READERS,
) -> AsyncGenerator[tuple[int, bytes], None]:
    """(rows, text) per batch of executions finished in [since, until), oldest first, walking
    (namespace, seq): `text` is the batch's JSON objects (led by `"type": kind` when given), one a
    line, each line ending in a newline, as UTF-8 bytes (the database's own text, never decoded into
    Python strings and encoded back: a file takes it as it is). Up to `readers` batches are encoded
    at once (a batch's bounds are found first by an index walk, so each one holds `batch` rows however
    namespaces interleave)."""
    if batch < 1:
        raise ValueError(f"batch must be ≥ 1, got {batch}")
    if readers < 1:
        raise ValueError(f"readers must be ≥ 1, got {readers}")
    e = ExecutionRow
    scope = [e.namespace == namespace, *within(e.finished_at, since, until)]
    async with engine.connect() as conn:
        dialect = conn.dialect
        after = 0
        if since is not None:  # no execution finished since `since` has a lower seq than this one
            after = int(await conn.scalar(select(func.min(e.seq)).where(*scope)) or 1) - 1
    bound = select(e.seq).where(*scope, e.seq > bindparam("after")).order_by(e.seq).offset(batch - 1).limit(1)
    query = _chunk_query(dialect.name, scope, batch, kind)
    database = sqlite_path(engine.url.render_as_string(hide_password=False))
    encoder = Workers(database, query, dialect, readers) if database is not None else _Connections(engine, query)
    # workers take the next batch as soon as they are free, not when the oldest batch is written: a
    # worker done before the one ahead of it in the log would otherwise wait for it
    depth = 2 * readers if database is not None else readers
    batches = _batches(engine, bound, after)
    pending: deque[asyncio.Task[tuple[int, bytes]]] = deque()

    async def read_ahead() -> None:
        while len(pending) < depth and (window := await anext(batches, None)) is not None:
            pending.append(asyncio.create_task(encoder.encode({"start": window[0], "end": window[1]})))

    try:
        await read_ahead()
        while pending:
            rows, text = await pending.popleft()
            await read_ahead()  # the next batches are encoded while the caller writes this one
            if rows:
                yield rows, text
    finally:
        try:
            await _abandon(pending)
        finally:
            await batches.aclose()
            await encoder.aclose()


async def _batches(engine: AsyncEngine, bound: Select[int], after: int) -> AsyncGenerator[tuple[int, int]]:
    """(start, end] seq windows of the batches after seq `after`, each end found by an index walk."""
    while True:
        async with engine.connect() as conn:
            end = await conn.scalar(bound, {"after": after})
        yield after, LAST_SEQ if end is None else end
        if end is None:  # what was left fitted one batch
            return
        after = end


class _Connections:
    """Batches encoded on the engine's connections: PostgreSQL builds the JSON in its own server
    processes, one a connection (and an in-memory SQLite database has no file for a worker)."""

    def __init__(self, engine: AsyncEngine, query: Select[int, bytes]) -> None:
        self._engine, self._query = engine, query

    async def encode(self, values: dict[str, int]) -> tuple[int, bytes]:
        """One batch, its lines each ending in a newline."""
        async with self._engine.connect() as conn:
            rows, text = (await conn.execute(self._query, values)).one()
        return rows, text + b"\n" if rows else b""

    async def aclose(self) -> None:
        """Nothing to end: the connections went back to the engine's pool."""


def _chunk_query(dialect: str, scope: list[ColumnElement[bool]], batch: int, kind: str | None) -> Select[int, bytes]:
    """(rows, text as bytes) of the first `batch` executions in `scope` with a seq in (start, end]."""
    e = ExecutionRow
    window = [e.seq > bindparam("start", type_=BigInteger), e.seq <= bindparam("end", type_=BigInteger)]
    line = json_object(dialect, kind).label("line")
    page = select(e.seq, line).where(*scope, *window).order_by(e.seq).limit(batch).subquery()
    return select(func.count(), _joined(dialect, page.c.line, page.c.seq))


def previous_rating(ratings: Subquery, *, latest: bool = False) -> ScalarSelect[int]:
    """The rating each of `ratings` replaced: its execution's latest earlier rating (None if first);
    `latest`: its execution's latest rating of all (the one its stored reward includes)."""
    other = RatingRow.__table__.alias("latest" if latest else "earlier")
    same = other.c.execution_id == ratings.c.execution_id
    return (
        select(other.c.rating)
        .where(same if latest else same & (other.c.id < ratings.c.id))
        .order_by(other.c.id.desc())
        .limit(1)
        .scalar_subquery()
    )


async def rating_chunks(
    engine: AsyncEngine,
    *,
    namespace: str = "default",
    since: datetime | None = None,
    until: datetime | None = None,
    batch: int = CHUNK_ROWS,
    kind: str | None = None,
) -> AsyncGenerator[tuple[int, bytes], None]:
    """(rows, text) per batch of the namespace's ratings created in [since, until), oldest first, as
    `execution_chunks` gives executions, each with `previous`: the rating it replaced (null for a
    first one). Each batch is a range of rating ids joined to their executions by key (a join driven
    from the executions side would walk the namespace); ratings are few, one batch at a time."""
    r = RatingRow.__table__
    window = within(r.c.created_at, since, until)
    page = select(r).where(r.c.id > bindparam("after"), *window).order_by(r.c.id).limit(batch).subquery("page")
    previous = previous_rating(page)
    dialect = engine.dialect.name
    line = json_object(dialect, kind, page.c, previous=previous).label("line")
    lines = (
        select(page.c.id, line)
        .select_from(page)
        .join(ExecutionRow, ExecutionRow.id == page.c.execution_id)
        .where(ExecutionRow.namespace == namespace)
        .order_by(page.c.id)
        .subquery()
    )
    last = select(func.max(page.c.id)).scalar_subquery()  # the range read, other namespaces' too
    query = select(last, func.count(lines.c.line), _joined(dialect, lines.c.line, lines.c.id))
    after = 0
    while True:
        async with engine.connect() as conn:
            end, rows, text = (await conn.execute(query, {"after": after})).one()
        if end is None:
            return
        if rows:
            yield rows, text + b"\n"
        after = end


async def _abandon(tasks: deque[asyncio.Task[tuple[int, bytes]]]) -> None:
    """Cancel batches read ahead that no one will take (the export stopped early); a batch that had
    failed meanwhile still raises."""
    for task in tasks:
        task.cancel()
    if tasks:
        await asyncio.wait(tasks)
    for task in tasks:
        if not task.cancelled() and (error := task.exception()) is not None:
            raise error
