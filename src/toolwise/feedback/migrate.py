"""Schema migrations (Alembic), run on start-up on every backend.

A database made before migrations existed (tables created directly, no `alembic_version`) is stamped
at the first revision, then upgraded like any other. Instances that start together on a fresh
database migrate one after the other, under the database's own lock, and each checks the schema
again once it holds it (so the later ones find it made): on PostgreSQL a transaction-scoped advisory
lock, on SQLite the write lock, taken with `BEGIN IMMEDIATE` before the first statement (Python's
sqlite3 would otherwise run the DDL outside any transaction, and two instances would both create
the tables). A database already at `HEAD` is opened without Alembic at all: one query instead of its
import, environment and script scan on every start and every CLI command.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:  # Alembic is imported when a database is opened, not with this module: a
    # server imports it after spawning its downstreams, while they boot
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0008"  # the newest revision in MIGRATIONS (tests/feedback/test_migrate.py checks it is Alembic's head)
_LOCK_KEY = 0x746F6F6C77697365  # "toolwise"
SCHEMA_WAIT_S = 120.0  # how long an instance waits for another's migration (a loaded machine: seconds)
log = logging.getLogger(__name__)  # one line when a migration ran; Alembic's own lines are the CLI's to quiet


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this code knows."""
    from alembic.script import ScriptDirectory

    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None
    return revision


def current(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


class MigrationError(Exception):
    """Alembic could not bring the database to the newest schema (e.g. it was made by a newer toolwise)."""


def _at_head(connection: Connection) -> bool:
    if not inspect(connection).has_table("alembic_version"):
        return False
    return list(connection.execute(text("SELECT version_num FROM alembic_version")).scalars()) == [HEAD]


def _revision(connection: Connection) -> str | None:
    """The revision `alembic_version` holds, without Alembic (None: the table is not there)."""
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def _lock(connection: Connection) -> None:
    """Hold the database's lock on the schema until this transaction ends (other instances wait, as long
    as a migration may take: `SCHEMA_WAIT_S`, not the seconds an ordinary write waits)."""
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    elif connection.dialect.name == "sqlite":
        connection.exec_driver_sql(f"PRAGMA busy_timeout = {int(SCHEMA_WAIT_S * 1000)}")  # this connection's
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _upgrade(connection: Connection) -> None:
    """Under the lock: migrate, unless an instance that held it before has already done so."""
    from alembic import command
    from alembic.util.exc import CommandError

    sqlite = connection.dialect.name == "sqlite"
    waited = connection.exec_driver_sql("PRAGMA busy_timeout").scalar() if sqlite else None
    _lock(connection)
    try:
        if _at_head(connection):
            return
        config = alembic_config(connection)
        tables = set(inspect(connection).get_table_names())
        if "executions" in tables and "alembic_version" not in tables:
            command.stamp(config, "0001")
        before = _revision(connection) if "executions" in tables else None
        command.upgrade(config, "head")
        if before is None:
            log.info("database schema created at %s", HEAD)
        else:
            log.info("database schema upgraded from %s to %s", before, HEAD)
    except CommandError as exc:
        if "Can't locate revision" in str(exc):  # a revision no migration here names: a newer toolwise's
            found = ", ".join(connection.execute(text("SELECT version_num FROM alembic_version")).scalars())
            raise MigrationError(
                f"its schema is at revision {found}, which this toolwise (newest revision {HEAD}) does not know: "
                "a newer toolwise made it; upgrade toolwise, or use another database with --database-url"
            ) from exc
        raise MigrationError(str(exc)) from exc
    finally:
        if waited is not None:  # the pooled connection goes back with its own timeout
            connection.exec_driver_sql(f"PRAGMA busy_timeout = {int(waited)}")


_MIGRATING = threading.Lock()  # alembic keeps its running migration in module globals: one at a time a process


async def _turn() -> None:
    """Take `_MIGRATING`, waiting on a worker thread; a caller cancelled meanwhile gives the turn back
    once it comes (else no migration would run again in this process)."""
    taken = asyncio.ensure_future(asyncio.to_thread(_MIGRATING.acquire))
    try:
        await asyncio.shield(taken)
    except asyncio.CancelledError:
        taken.add_done_callback(lambda _: _MIGRATING.release())
        raise


async def upgrade(engine: AsyncEngine) -> None:
    """Bring the database to the newest schema (one query when it is there). Migrations of several databases
    in one process (two instances started together) take turns: alembic's `context` is process-global, and two
    at once on one event loop interleave in it (the second ran the first's script). The turn is waited for on
    a worker thread, never on the event loop."""
    async with engine.connect() as conn:
        if await conn.run_sync(_at_head):
            return
    await _turn()
    try:
        async with engine.begin() as conn:
            if not await conn.run_sync(_at_head):
                await conn.run_sync(_upgrade)
    finally:
        _MIGRATING.release()


async def revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(current)
