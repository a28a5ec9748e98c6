"""FeedbackService: the owner of the feedback database, and of the one path every write takes.

It opens the engine, brings the schema up to date, and runs the group-commit writer, all held by a
`Database` handle (feedback/database.py: every write goes through its `write`); what it stores is
reached through stores named for it, each given that handle: `log` (executions, ratings, episodes,
per-tool summaries; `reads` and `reports` read it), `snapshots` (learner snapshots) and `instances`
(running toolwise instances).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar

from sqlalchemy import Connection, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine

from toolwise.feedback import toolstats
from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN, canonical_json
from toolwise.feedback.database import Database
from toolwise.feedback.deadletter import DeadLetters, dead_letter_file, import_rows, read_dead_letters
from toolwise.feedback.engine import (
    SQLiteWriteThread,
    check_database_url,
    check_sqlite,
    create_engine,
    own_connect_timeout,
    sqlite_path,
)
from toolwise.feedback.errors import (
    DatabaseUnusableError,
    DeadLetterError,
    ServiceNotStartedError,
    describe_database_error,
)
from toolwise.feedback.failures import advice
from toolwise.feedback.files import default_database_url
from toolwise.feedback.instances import InstanceRegistry
from toolwise.feedback.integrity import CHECK_AFTER_S, IntegrityCheck
from toolwise.feedback.log import ExecutionLog
from toolwise.feedback.migrate import SCHEMA_WAIT_S, MigrationError, upgrade
from toolwise.feedback.reads import Generation, LogReads
from toolwise.feedback.records import Execution, WriterStats
from toolwise.feedback.reports import LogReports
from toolwise.feedback.rows import ExecutionInsert, ExecutionRows, Prepared, stored_ids
from toolwise.feedback.schema import SecretRow
from toolwise.feedback.snapshots import SnapshotStore
from toolwise.feedback.writer import GroupCommitWriter

log = logging.getLogger(__name__)
R = TypeVar("R")
IMPORT_BATCH = 500  # dead letters a transaction


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
        connect_timeout_s: float = 10.0,
        synchronous: str = "FULL",
        dead_letter_path: Path | None = None,
        store_timeout_s: float = 10.0,
        integrity_check_after_s: float | None = CHECK_AFTER_S,
    ) -> None:
        self.url = url or default_database_url()
        # The salt is the database's own, read at start; off, `store_queries` keeps queries and comments out.
        self.rows = ExecutionRows(
            salt=b"", store_arguments=store_arguments, store_queries=store_queries, redact_pattern=redact_pattern
        )
        self._busy_timeout_s = busy_timeout_s
        self._connect_timeout_s = connect_timeout_s  # a PostgreSQL server's wait to answer a new connection
        self._synchronous = synchronous
        self._batch_size = batch_size
        self._flush_interval_s = flush_interval_ms / 1000
        self._max_queue = max_queue
        self._store_timeout_s = store_timeout_s
        db_file = sqlite_path(self.url)
        self.dead_letters = DeadLetters(dead_letter_path or dead_letter_file(db_file))
        # an SQLite file is checked once in the background, `integrity_check_after_s` after start (None: never)
        checked = db_file is not None and integrity_check_after_s is not None
        self.integrity = IntegrityCheck(db_file) if db_file is not None and checked else None
        self._integrity_after_s = integrity_check_after_s or 0.0
        self._integrity_task: asyncio.Task[None] | None = None
        self.database = Database()
        self._insert: ExecutionInsert | None = None
        generation = Generation()
        self.reads = LogReads(self.database, generation)  # what replay, sync and rating read
        self.reports = LogReports(self.database, generation)  # what admins read
        self.log = ExecutionLog(self.database, self.rows, self.reads, generation)  # the writes
        self.snapshots = SnapshotStore(self.database)
        self.instances = InstanceRegistry(self.database)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open the database and bring its schema up to date; a database that cannot be used raises
        `DatabaseUnusableError` naming it and what is wrong (one message, not a driver traceback)."""
        engine: AsyncEngine | None = None
        check_database_url(self.url)
        try:
            if (path := sqlite_path(self.url)) is not None:
                await asyncio.to_thread(check_sqlite, path, SCHEMA_WAIT_S)
                # the database's disk can fill up: dead letters keep room on it
                await asyncio.to_thread(self.dead_letters.reserve)
            engine = create_engine(
                self.url,
                busy_timeout_s=self._busy_timeout_s,
                synchronous=self._synchronous,
                connect_timeout_s=self._connect_timeout_s,
            )
            await upgrade(engine)
            async with engine.connect() as conn:
                salt = await conn.scalar(select(SecretRow.value).where(SecretRow.name == "argument_salt"))
        except (SQLAlchemyError, sqlite3.Error, OSError, MigrationError) as exc:
            if engine is not None:
                await engine.dispose()
            path = sqlite_path(self.url)
            what = advice(exc, path)  # a damaged file, a lock, a permission: what to do about it
            waited_s = None if own_connect_timeout(self.url) else self._connect_timeout_s  # None: "in time"
            said = f"{path or shown_url(self.url)}: {describe_database_error(exc, waited_s=waited_s)}"
            raise DatabaseUnusableError(said if what is None else f"{said}; {what}") from exc
        if salt is None:
            await engine.dispose()
            raise DatabaseUnusableError(f"{shown_url(self.url)}: the argument salt is missing from table 'secrets'")
        self.rows.open(bytes.fromhex(salt))
        thread = None  # SQLite files: the one writing thread
        if sqlite_path(self.url) is not None:
            thread = SQLiteWriteThread(self.url, busy_timeout_s=self._busy_timeout_s, synchronous=self._synchronous)
        self._insert = ExecutionInsert(self.rows, engine.dialect)
        writer = GroupCommitWriter(
            self._insert.prepare,
            self._write_batch,
            self._dead_letter,
            self._unstored,
            batch_size=self._batch_size,
            flush_interval_s=self._flush_interval_s,
            max_queue=self._max_queue,
            wait_s=self._store_timeout_s,
        )
        self.database.open(engine, thread, writer)
        writer.start()
        if self.integrity is not None:
            work = self._check_integrity(self.integrity)
            self._integrity_task = asyncio.create_task(work, name="toolwise-integrity-check")
        log.info("feedback store ready at %s", shown_url(self.url))

    async def _check_integrity(self, check: IntegrityCheck) -> None:
        """The background integrity check, on a thread of its own (it lowers its own priority)."""
        await asyncio.sleep(self._integrity_after_s)
        thread = ThreadPoolExecutor(1, thread_name_prefix="toolwise-integrity-check")
        try:
            await asyncio.get_running_loop().run_in_executor(thread, check.run)
        finally:
            thread.shutdown(wait=False)  # a check cancelled at shutdown was interrupted: it ends by itself

    async def aclose(self) -> None:
        """Write everything queued, then release the database. A database that takes nothing for
        `store_timeout_s` gets the rest dead-lettered rather than a shutdown that never ends."""
        if self.integrity is not None:
            self.integrity.stop()  # interrupts a check under way: a long one would hold up the exit
        if self._integrity_task is not None:
            self._integrity_task.cancel()
            await asyncio.wait([self._integrity_task])
        if abandoned := await self.database.aclose(self._store_timeout_s):
            log.error(
                "shutdown: %d records the database did not take were dead-lettered to %s; once it answers, put"
                " them back with `toolwise import-dead-letters %s`",
                abandoned,
                self.dead_letter_path,
                self.dead_letter_path,
            )

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def dead_letter_path(self) -> Path:
        """The dead-letter file (on a full disk, records may go to `dead_letters.fallbacks` instead)."""
        return self.dead_letters.path

    @property
    def engine(self) -> AsyncEngine:
        return self.database.engine

    @property
    def writer(self) -> GroupCommitWriter[Execution, Prepared]:
        """The group-commit writer of the executions (queued by `log.record_execution`)."""
        return self.database.writer

    @property
    def stats(self) -> WriterStats:
        """The writer's counters, and what the integrity check found wrong with the file."""
        stats = self.writer.stats
        damaged = self.integrity.damaged if self.integrity is not None else None
        return stats if damaged is None else replace(stats, damaged=damaged)

    # -- the write path ----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Return once every execution recorded before this call is committed."""
        await self.database.flush()

    async def write(self, work: Callable[[Connection], R]) -> R:
        """Run `work` in one write transaction on the write path (`Database.write`)."""
        return await self.database.write(work)

    async def _write_batch(self, prepared: Prepared) -> None:
        """Insert a batch of executions and fold it into its tools' summaries, in one transaction."""
        if self._insert is None:
            raise ServiceNotStartedError
        sql = self._insert.compiled.sql
        params, summary = prepared

        def summarise(conn: Connection) -> None:
            toolstats.apply(conn, toolstats.deltas(summary))

        try:
            await self.database.execute(sql, params, summarise)
        finally:
            self.log.summaries_changed()

    async def _unstored(self, batch: list[Execution]) -> list[Execution]:
        """The executions of a batch the log does not hold (the writer asks after a commit whose answer was
        lost, which may have stored them; no flush: the writer itself is waiting)."""
        async with self.database.engine.connect() as conn:
            stored = await conn.run_sync(stored_ids, [e.id for e in batch])
        return [e for e in batch if e.id not in stored]

    def _dead_letter(self, execution: Execution, exc: BaseException) -> None:
        """Last resort for a record the database refuses: keep it on disk, loudly. When no file takes
        it, `DeadLetterError` carries the record as it would have been stored (redacted), for the log."""
        line = canonical_json({"error": repr(exc), "execution": self.rows.named(execution)})
        try:
            where = self.dead_letters.write(line)
        except DeadLetterError as lost:
            raise DeadLetterError(f"execution {execution.id} is lost ({lost}); its record: {line}") from exc
        log.error("execution %s written to %s", execution.id, where)

    async def import_dead_letters(self, path: Path) -> tuple[int, int]:
        """Put the executions of a dead-letter file into the log; (imported, already there). Learners
        replay them as any record that follows their snapshot."""
        return await self.import_dead_letter_rows(list(read_dead_letters(path)))

    async def import_dead_letter_rows(self, rows: list[dict[str, Any]]) -> tuple[int, int]:
        """`import_dead_letters` of rows read already (`read_dead_letters`: the CLI reads every file before
        it opens the database, so that a file that is not one refuses before a database is made)."""
        imported = 0
        rows = [{**row, "arguments": self.rows.redacted(row["arguments"])} for row in rows]  # as stored now
        for start in range(0, len(rows), IMPORT_BATCH):
            imported += await self.write(partial(import_rows, rows=rows[start : start + IMPORT_BATCH]))
        self.log.summaries_changed()
        return imported, len(rows) - imported


def shown_url(url: str) -> str:
    """A database URL as logged and printed: which database, never its password."""
    return make_url(url).render_as_string(hide_password=True)
