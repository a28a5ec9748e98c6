"""Schema migrations (Alembic), run on start-up on every backend.

A database made before migrations existed (tables created directly, no `alembic_version`) is stamped
at the first revision, then upgraded like any other. On PostgreSQL an advisory lock makes instances
that start together migrate one after the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:  # Alembic is imported when a database is opened (~0.14 s), not with this module: a
    # server imports it after spawning its downstreams, while they boot
    from alembic.config import Config

MIGRATIONS = Path(__file__).parent / "migrations"
_LOCK_KEY = 0x746F6F6C77697365  # "toolwise"


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


def _upgrade(connection: Connection) -> None:
    from alembic import command

    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    config = alembic_config(connection)
    tables = set(inspect(connection).get_table_names())
    if "executions" in tables and "alembic_version" not in tables:
        command.stamp(config, "0001")
    command.upgrade(config, "head")


async def upgrade(engine: AsyncEngine) -> None:
    """Bring the database to the newest schema (a no-op when it is there)."""
    async with engine.begin() as conn:
        await conn.run_sync(_upgrade)


async def revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as conn:
        return await conn.run_sync(current)
