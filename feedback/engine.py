"""Engine creation: the database URL decides the backend; SQLite gets WAL and a busy timeout."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import platformdirs
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine


def data_dir() -> Path:
    """toolwise's folder under the user's data directory (created if missing)."""
    path = Path(platformdirs.user_data_dir("toolwise", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def default_database_url() -> str:
    """`TOOLWISE_DATABASE_URL` when set, else an SQLite file in `data_dir()`."""
    return os.environ.get("TOOLWISE_DATABASE_URL") or f"sqlite+aiosqlite:///{data_dir() / 'toolwise.db'}"


def sqlite_path(url: str) -> Path | None:
    """The file behind an SQLite URL, or None for other backends and in-memory databases."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def create_engine(url: str, *, busy_timeout_s: float = 5.0, synchronous: str = "FULL") -> AsyncEngine:
    """An async engine for `url`. On SQLite: WAL journal (readers never block the writer) and
    `synchronous` FULL by default, so a committed batch survives power loss; group commit pays
    one fsync per batch rather than per record."""
    if synchronous not in ("OFF", "NORMAL", "FULL"):
        raise ValueError(f"synchronous must be OFF, NORMAL or FULL, got {synchronous!r}")
    path = sqlite_path(url)
    if path is None:
        return create_async_engine(url, pool_pre_ping=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_async_engine(url, connect_args={"timeout": busy_timeout_s})

    @event.listens_for(engine.sync_engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine
