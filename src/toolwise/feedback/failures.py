"""Which database errors are the user's situation (a damaged file, a full or failing disk, a lock held by
another process, no permission, a lost server) rather than a bug, and what to do about each: an admin
command answers the former in one line (cli/database.py) and keeps a bug's traceback."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from toolwise.feedback.errors import DatabaseFailedError, FeedbackError, describe_database_error
from toolwise.feedback.integrity import recovery

# What a database that fails raises (the store's own errors, the driver's, SQLAlchemy's; asyncpg's lost connection
# is an OSError SQLAlchemy does not wrap): the user's situation, said in a line, not a bug's traceback.
DATABASE_FAILURES = (FeedbackError, SQLAlchemyError, OSError)

_PERMISSION = "toolwise may not read or write it: check the permissions of the file and of its folder"
_CANT_OPEN = "toolwise cannot open it: check that it is a file (not a folder) that toolwise may read and write"
_UNREACHED = "toolwise cannot reach its server, or lost the connection: check that it runs and is reachable"
_LOCKED = "another process holds it locked: run again once that one lets go"


def _sqlite_advice(code: int, path: Path | None) -> str | None:
    """What to do about an SQLite primary result code that is the file's or the disk's situation."""
    damaged = f"it is damaged: {recovery(path) if path else 'restore a backup'} (`toolwise doctor` checks it whole)"
    return {
        sqlite3.SQLITE_CORRUPT: damaged,
        sqlite3.SQLITE_NOTADB: f"it is no SQLite database (the wrong file?) or {damaged.removeprefix('it ')}",
        sqlite3.SQLITE_IOERR: "its disk failed to read or write it: check the disk, then run again",
        sqlite3.SQLITE_FULL: "its disk is full: free some space, then run again",
        sqlite3.SQLITE_READONLY: _PERMISSION,
        sqlite3.SQLITE_PERM: _PERMISSION,
        sqlite3.SQLITE_CANTOPEN: _CANT_OPEN,
        sqlite3.SQLITE_BUSY: _LOCKED,
        sqlite3.SQLITE_LOCKED: _LOCKED,
    }.get(code & 0xFF)


def advice(exc: BaseException, path: Path | None = None) -> str | None:
    """What the user can do about `exc` (a driver error, or SQLAlchemy's wrapping of one) on the database
    at `path` (None: a server's), or None where it is no situation of theirs: a bug's SQL keeps its traceback."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    if isinstance(orig, sqlite3.Error) and (code := getattr(orig, "sqlite_errorcode", None)) is not None:
        return _sqlite_advice(code, path)
    if isinstance(orig, OSError) and path is not None:
        return "check the file and its disk, then run again"
    if isinstance(orig, OSError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return _UNREACHED
    return None


def database_failure(exc: BaseException, where: str, path: Path | None = None) -> DatabaseFailedError | None:
    """`exc` as the one line a user acts on, naming the database `where`, or None where it is a bug's."""
    what = advice(exc, path)
    if what is None:
        return None
    return DatabaseFailedError(f"{where}: {describe_database_error(exc)}; {what}")
