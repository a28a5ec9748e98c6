"""Execution records as table rows and back, with the columns taken from the schema itself.

A row's values are picked by column name, in the order of `ExecutionRow`'s columns: reordering or
adding a column in schema.py cannot shift values into the wrong column (an `Execution` field is
named after each column; `tests/feedback/test_rows.py` checks that they match).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, Dialect, RowMapping, select

from toolwise.feedback.arguments import argument_digest, redact, redact_text, storable
from toolwise.feedback.bulk import CompiledInsert
from toolwise.feedback.records import Episode, Execution, Rating
from toolwise.feedback.schema import EpisodeRow, ExecutionRow, RatingRow

EXECUTION_COLUMNS: tuple[str, ...] = tuple(c.key for c in ExecutionRow.__table__.columns if c.key != "seq")
"""The columns an insert fills, in the table's order (`seq` is the database's)."""

_DERIVED = ("argument_digest", "arguments", "query", "error_message")  # stored as computed, not as given

Summary = tuple[str, str, bool, float, datetime, float | None, bool | None]
"""What a tool's running summary needs of one execution: namespace, tool, success, latency (ms), finish,
reward, explored."""
Prepared = tuple[list[Any], list[Summary]]
"""A batch ready for the database: driver parameters of the insert, and its tools' summary inputs."""


class ExecutionRows:
    """Turns executions into stored rows: the arguments' digest keyed by the database's salt (whatever
    digest the record carries is replaced), secrets redacted, free text dropped when `store_queries` is
    off, arguments kept only with `store_arguments`."""

    def __init__(self, *, salt: bytes, store_arguments: bool, store_queries: bool, redact_pattern: str) -> None:
        self.salt = salt
        self._store_arguments = store_arguments
        self._store_queries = store_queries
        self._redact = re.compile(redact_pattern, re.IGNORECASE)

    def open(self, salt: bytes) -> None:
        """Digest with `salt` from now on: the database's own, read when it opens."""
        self.salt = salt

    def digest(self, arguments: Mapping[str, Any] | None) -> str:
        """The digest stored for these arguments in this database (salted with its own salt)."""
        return argument_digest(arguments, self.salt)

    def free_text(self, text: str | None) -> str | None:
        """A query or comment as stored: redacted, or not at all with `store_queries` off."""
        return storable(redact_text(text)) if text and self._store_queries else None

    def redacted(self, arguments: Any) -> Any:
        """Arguments as stored: secrets masked, NaN and ±infinity as strings (`redact`); also those of a dead
        letter an older toolwise wrote, which holds the bare words that a JSON column refuses or keeps unreadable."""
        return None if arguments is None else redact(arguments, self._redact)

    def maker(self, columns: Sequence[str]) -> Callable[[Execution], list[Any]]:
        """A function from an execution to its stored values in the order of `columns` (each value is
        the field of the column's name; the digest is computed, secrets are redacted)."""
        values_of = attrgetter(*columns)  # one C call for every plain field
        digest_at, arguments_at, query_at, error_at = (columns.index(name) for name in _DERIVED)

        def row(e: Execution) -> list[Any]:
            values = list(values_of(e))
            keep = self._store_arguments and e.arguments is not None
            values[arguments_at] = self.redacted(e.arguments) if keep else None
            values[digest_at] = argument_digest(e.arguments, self.salt)
            values[query_at] = self.free_text(e.query)
            values[error_at] = None if e.error_message is None else storable(redact_text(e.error_message))
            return values

        return row

    def named(self, e: Execution) -> dict[str, Any]:
        """The stored row as a dict keyed by column name (dead letters, tests)."""
        return dict(zip(EXECUTION_COLUMNS, self.maker(EXECUTION_COLUMNS)(e), strict=True))


class ExecutionInsert:
    """A batch of executions as driver-ready parameters of one compiled multi-row insert."""

    def __init__(self, rows: ExecutionRows, dialect: Dialect) -> None:
        table = ExecutionRow.metadata.tables[ExecutionRow.__tablename__]
        self.compiled = CompiledInsert(table, EXECUTION_COLUMNS, dialect)
        self._row = rows.maker(self.compiled.order)  # values straight in the statement's parameter order

    def prepare(self, batch: list[Execution]) -> Prepared:
        """Parameters for a batch and what its tools' summaries need (runs on the event loop while the
        previous batch commits; the summaries are folded in on the database's side)."""
        summary = [(e.namespace, e.tool, e.success, e.latency_ms, e.finished_at, e.reward, e.explored) for e in batch]
        return self.compiled.params([self._row(e) for e in batch]), summary


def stored_ids(conn: Connection, ids: list[str]) -> set[str]:
    """Which of these execution ids the log holds."""
    return set(conn.scalars(select(ExecutionRow.id).where(ExecutionRow.id.in_(ids)))) if ids else set()


def execution_from_row(row: RowMapping | Mapping[str, Any]) -> Execution:
    """An execution read back from its row (every column by name)."""
    return Execution(**{key: row[key] for key in (*EXECUTION_COLUMNS, "seq")})


def rating_from_row(row: RowMapping | Mapping[str, Any]) -> Rating:
    """A rating read back from its row (every column by name)."""
    return Rating(**{c.key: row[c.key] for c in RatingRow.__table__.columns})


def episode_values(episode: Episode) -> dict[str, Any]:
    """An episode's row values, every column by name but `seq` (the database's)."""
    values = {c.key: getattr(episode, c.key) for c in EpisodeRow.__table__.columns if c.key != "seq"}
    return {**values, "tools": list(episode.tools)}


def episode_from_row(row: RowMapping | Mapping[str, Any]) -> Episode:
    """An episode read back from its row (every column by name)."""
    values = {c.key: row[c.key] for c in EpisodeRow.__table__.columns}
    return Episode(**{**values, "tools": list(values["tools"])})
