"""The started database as its stores use it: the engine (and its dialect), the one write path, and the
group commit of executions (`flush` before a read that must see them, `record` to queue one).

`FeedbackService` opens it when it starts and closes it when it stops; the stores (log, reads, reports,
snapshots, instances) hold this handle, never the service, so each can be built and tested on its own.
Every write goes through `write`: on an SQLite file that is the one thread and connection that also
commits the executions' batches (two connections writing one file wait on each other's lock); on
PostgreSQL, a transaction of the engine."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import Connection, Dialect
from sqlalchemy.ext.asyncio import AsyncEngine

from toolwise.feedback.engine import SQLiteWriteThread
from toolwise.feedback.errors import ServiceNotStartedError
from toolwise.feedback.records import Execution
from toolwise.feedback.rows import Prepared
from toolwise.feedback.writer import GroupCommitWriter

R = TypeVar("R")


class Database:
    """The open engine, the SQLite write thread (None on PostgreSQL) and the executions' writer; every
    use before `open` or after `close` raises `ServiceNotStartedError`."""

    def __init__(self) -> None:
        self._engine: AsyncEngine | None = None
        self._thread: SQLiteWriteThread | None = None
        self._writer: GroupCommitWriter[Execution, Prepared] | None = None

    def open(
        self, engine: AsyncEngine, thread: SQLiteWriteThread | None, writer: GroupCommitWriter[Execution, Prepared]
    ) -> None:
        self._engine, self._thread, self._writer = engine, thread, writer

    async def aclose(self, timeout_s: float) -> int:
        """Write everything queued (what the database takes within `timeout_s`), then release it; how
        many records were dead-lettered instead."""
        abandoned = await self._writer.aclose(timeout_s) if self._writer is not None else 0
        if self._thread is not None:
            await self._thread.aclose()
        if self._engine is not None:
            await self._engine.dispose()
        self._engine = self._writer = self._thread = None
        return abandoned

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise ServiceNotStartedError
        return self._engine

    @property
    def dialect(self) -> Dialect:
        return self.engine.dialect

    @property
    def writer(self) -> GroupCommitWriter[Execution, Prepared]:
        """The group-commit writer of the executions."""
        if self._writer is None:
            raise ServiceNotStartedError
        return self._writer

    async def record(self, execution: Execution, *, force: bool = False) -> None:
        """Queue an execution for the next group commit."""
        await self.writer.put(execution, force=force)

    async def flush(self) -> None:
        """Return once every execution recorded before this call is committed."""
        await self.writer.flush()

    async def write(self, work: Callable[[Connection], R]) -> R:
        """Run `work` in one write transaction on the write path."""
        if self._thread is not None:
            return await self._thread.run(work)
        async with self.engine.begin() as conn:
            return await conn.run_sync(work)

    async def execute(self, sql: str, params: Sequence[Any], then: Callable[[Connection], None]) -> None:
        """Run one compiled statement over many parameter sets, then `then`, in one write transaction."""
        if self._thread is not None:
            await self._thread.execute(sql, params, then)
            return
        async with self.engine.begin() as conn:
            await conn.exec_driver_sql(sql, params)
            await conn.run_sync(then)
