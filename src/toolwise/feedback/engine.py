"""Engine creation: the database URL decides the backend; SQLite gets WAL and a busy timeout.

On an SQLite file, every write goes through one `SQLiteWriteThread`: a sync engine on one dedicated
thread, so a batch of executions costs the event loop one thread hop, and no two connections of ours
wait on each other's write lock. Through aiosqlite every statement of a transaction (begin, execute,
commit, the pool's reset) is a hop of its own, each waking the loop and switching greenlets, work that
sits between proxied calls (its cost: the README's "Recording executions"). PostgreSQL (asyncpg) is
natively async and keeps the async engine.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy
from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from toolwise.feedback.errors import DatabaseUnusableError, libpq_seconds
from toolwise.feedback.files import create_private

R = TypeVar("R")


WAL_RETRY_S = 0.05  # between tries of the switch to WAL while another instance holds the lock


ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg"}
URL_SHAPES = "sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER:PASSWORD@HOST/DATABASE"


def check_database_url(url: str) -> None:
    """Raises DatabaseUnusableError saying what to give for a URL SQLAlchemy cannot read (it raised a
    traceback), one of a database it does not know or whose driver is not installed (the engine raised
    `NoSuchModuleError` / `ModuleNotFoundError`), or one with a synchronous driver (SQLAlchemy's usual
    `sqlite:///…`, `postgresql://…`), which would fail deep in the engine saying only that "the asyncio
    extension requires an async driver"."""
    parsed = parse_url(url)
    shown = parsed.render_as_string(hide_password=True)
    wanted = ASYNC_DRIVERS.get(parsed.drivername.partition("+")[0])  # `postgresql+psycopg2`: its async one
    try:
        dialect = parsed.get_dialect()
    except (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError):
        if wanted is None:
            raise DatabaseUnusableError(
                f"{shown}: SQLAlchemy knows no database {parsed.drivername!r}: give {URL_SHAPES}"
            ) from None
    else:  # a driver named that has an async variant is one (`postgresql+psycopg`: create_async_engine takes it)
        named = "+" in parsed.drivername and dialect.get_async_dialect_cls(parsed).is_async
        if getattr(dialect, "is_async", False) or named:
            try:
                dialect.get_async_dialect_cls(parsed).import_dbapi()
            except ImportError as exc:
                raise DatabaseUnusableError(
                    f"{shown}: its driver is not installed ({exc}): install it into toolwise's environment, "
                    f"or give {URL_SHAPES}"
                ) from None
            return
    give = parsed.set(drivername=wanted).render_as_string(hide_password=True) if wanted else URL_SHAPES
    raise DatabaseUnusableError(f"{shown}: toolwise needs an async driver in the URL: give {give}")


def parse_url(url: str) -> sqlalchemy.URL:
    """`url` read by SQLAlchemy; DatabaseUnusableError saying what to give for one it cannot read."""
    try:
        return make_url(url)
    except sqlalchemy.exc.ArgumentError:  # not echoed: it may hold a password
        raise DatabaseUnusableError(
            f"the database URL (--database-url, TOOLWISE_DATABASE_URL or database_url) is no URL: give {URL_SHAPES}"
        ) from None


def sqlite_path(url: str) -> Path | None:
    """The file behind an SQLite URL, or None for other backends and in-memory databases."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def check_sqlite(path: Path, wait_s: float) -> None:
    """Open the file, read its header and put it in WAL mode, synchronously (run it on a thread), so that
    a corrupt or unopenable database fails here with sqlite's own message (through aiosqlite the failure
    leaves a worker thread behind that prints a traceback when the event loop is gone). A folder or file
    that cannot be made raises DatabaseUnusableError saying what to do.

    The switch to WAL takes the file's exclusive lock once, on a fresh file; instances started together
    meet there, and SQLite answers "database is locked" at once, without waiting, where waiting could
    deadlock (two readers both promoting). So it is retried for up to `wait_s`, as long as a migration may
    hold the schema (after it, every connection's own `journal_mode=WAL` is a no-op)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        create_private(path)  # before sqlite3 creates it with the umask's mode
    except OSError as exc:
        where = exc.filename or path
        raise DatabaseUnusableError(
            f"cannot create {path}: {exc.strerror} ({where}); make that folder writable, or use another "
            "database with --database-url (or TOOLWISE_DATABASE_URL)"
        ) from exc
    deadline = time.monotonic() + wait_s
    conn = sqlite3.connect(path, timeout=wait_s, isolation_level=None)
    try:
        conn.execute("PRAGMA schema_version").fetchone()
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(WAL_RETRY_S)
            else:
                return
    finally:
        conn.close()


def create_engine(
    url: str, *, busy_timeout_s: float = 5.0, synchronous: str = "FULL", connect_timeout_s: float = 10.0
) -> AsyncEngine:
    """An async engine for `url`. On SQLite: WAL journal (readers never block the writer) and
    `synchronous` FULL by default, so a committed batch survives power loss; group commit pays
    one fsync per batch rather than per record. On PostgreSQL a new connection waits `connect_timeout_s`
    for the server (asyncpg's own wait is 60 s, psycopg's for ever), and its session is in UTC."""
    path = sqlite_path(url)
    if path is None:
        return create_async_engine(url, pool_pre_ping=True, connect_args=_postgresql_args(url, connect_timeout_s))
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    create_private(path)
    engine = create_async_engine(url, connect_args={"timeout": busy_timeout_s})
    _sqlite_pragmas(engine.sync_engine, synchronous)
    return engine


def _postgresql_args(url: str, connect_timeout_s: float) -> dict[str, Any]:
    """Each driver's words for the same two things: times come back in the session's zone (the server's by
    default), so UTC, as the log's are meant; and a bounded wait for a server that does not answer."""
    parsed = make_url(url)
    driver = parsed.get_driver_name()
    if driver == "asyncpg":
        return {"server_settings": {"timezone": "UTC"}, "timeout": connect_timeout_s}
    if driver == "psycopg":  # libpq's parameters, which replace the URL's (and PGOPTIONS): added to them instead
        given = parsed.query.get("options") or os.environ.get("PGOPTIONS", "")
        options = " ".join([given] if isinstance(given, str) else given)
        args: dict[str, Any] = {"options": f"{options} -c TimeZone=UTC".strip()}
        if not own_connect_timeout(url):
            args["connect_timeout"] = libpq_seconds(connect_timeout_s)
        return args
    return {}


def own_connect_timeout(url: str) -> bool:
    """A psycopg URL whose own libpq connect_timeout (or PGCONNECT_TIMEOUT) sets the wait, not toolwise's."""
    parsed = make_url(url)
    given = "connect_timeout" in parsed.query or bool(os.environ.get("PGCONNECT_TIMEOUT"))
    return parsed.get_driver_name() == "psycopg" and given


def _sqlite_pragmas(engine: Engine, synchronous: str) -> None:
    if synchronous not in ("OFF", "NORMAL", "FULL"):
        raise ValueError(f"synchronous must be OFF, NORMAL or FULL, got {synchronous!r}")

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()


class DatabaseFileGoneError(OSError):
    """The SQLite file toolwise writes was deleted or replaced while it ran: what it wrote since would go
    to a file nobody sees (the open connection keeps writing the deleted one) and vanish at exit.
    Transient for the writer (an OSError): records wait, and are dead-lettered at shutdown (a restart
    opens the file anew)."""


class SQLiteWriteThread:
    """The one thread (and sync engine) that writes an SQLite file: batches of executions (the
    group-commit writer keeps one in flight at a time) and every other write, each in its own transaction.
    Before each, it checks that the file is still the one it opened (`DatabaseFileGoneError`)."""

    def __init__(self, url: str, *, busy_timeout_s: float = 5.0, synchronous: str = "FULL") -> None:
        self.engine = sqlalchemy.create_engine(
            make_url(url).set(drivername="sqlite"),
            connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        )
        _sqlite_pragmas(self.engine, synchronous)
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="toolwise-sqlite-writer")
        self._path = sqlite_path(url)
        self._identity: tuple[int, int] | None = None  # the file's (device, inode) at the first write

    def _check_file(self) -> None:
        if self._path is None:
            return
        try:
            found = os.stat(self._path)
        except FileNotFoundError:
            raise DatabaseFileGoneError(
                f"the database file {self._path} was deleted while toolwise ran: nothing written now would be "
                "kept; records wait and are dead-lettered at shutdown; restore the file and restart toolwise"
            ) from None
        identity = (found.st_dev, found.st_ino)
        if self._identity is None:
            self._identity = identity
        elif identity != self._identity:
            raise DatabaseFileGoneError(
                f"the database file {self._path} was replaced while toolwise ran (it writes the file it opened, "
                "which nothing reads any more): restart toolwise to use the new one"
            )

    async def execute(self, sql: str, params: Sequence[Any], then: Callable[[Connection], None] | None = None) -> None:
        """Run `sql` for every parameter row, then `then(connection)`, in one transaction."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self._execute, sql, params, then)

    def _execute(self, sql: str, params: Sequence[Any], then: Callable[[Connection], None] | None) -> None:
        self._check_file()
        with self.engine.begin() as conn:
            conn.exec_driver_sql(sql, params)
            if then is not None:
                then(conn)

    async def run(self, work: Callable[[Connection], R]) -> R:
        """Run `work` in a transaction of its own on this thread (other writes to the same file)."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._run, work)

    def _run(self, work: Callable[[Connection], R]) -> R:
        self._check_file()
        with self.engine.begin() as conn:
            return work(conn)

    async def aclose(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self.engine.dispose)
        self._thread.shutdown()
