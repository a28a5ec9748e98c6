"""Running an admin command (`snapshot`, `inspect`, `import-dead-letters`) on the database of a config,
and the learned state as of now; no running server is needed."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from toolwise.cli.common import database_or_exit, fail, settings_or_exit
from toolwise.config import Settings
from toolwise.errors import UserError
from toolwise.feedback.errors import DatabaseFailedError, DeadLetterError, StoreUnavailableError

if TYPE_CHECKING:
    from toolwise.feedback import FeedbackService
    from toolwise.server.services import Services


def run(
    config: Path | None,
    work: Callable[[Settings, FeedbackService], Awaitable[None]],
    database_url: str | None = None,
    create: bool = False,
    output: Path | None = None,
) -> None:
    """`work` on the database of CONFIG (or --database-url). A command that only reads (`create` false)
    refuses an SQLite file that does not exist rather than leave an empty database behind; a command that
    writes `output` refuses one of the database's own files there (it would be truncated). A `UserError`
    is answered in one line, exit 1; a database that cannot be opened or fails under the command (damaged,
    a full disk, locked, a lost server) in one line saying what to do, exit 2; anything else is a bug and
    keeps its traceback (typer prints it)."""
    # The store, imported when a command runs: the CLI's start (its help, `--version`) does without.
    from sqlalchemy.exc import SQLAlchemyError

    from toolwise.feedback import FeedbackService, shown_url
    from toolwise.feedback.failures import database_failure

    settings = settings_or_exit(config, database_url)
    path = sqlite_file_or_exit(settings.database_url, must_exist=not create)
    if output is not None and any(_same(output, kept) for kept in _kept_files(path)):
        fail(
            f"{output} is a file toolwise keeps for the database {shown_url(settings.database_url)}: writing it "
            "would destroy what it holds; name another file"
        )

    async def main() -> None:
        async with FeedbackService(settings.database_url) as feedback:
            await work(settings, feedback)

    try:
        with database_or_exit():
            asyncio.run(main())
    except UserError as exc:  # what the user asked is refused, the message says why
        fail(str(exc), exc, code=1)
    except DatabaseFailedError as exc:  # its message says what to do
        fail(f"database failed: {exc}", exc)
    except (StoreUnavailableError, DeadLetterError) as exc:  # the database takes no writes in time
        fail(
            f"database failed: {exc}; check that its disk has room and nothing else holds it locked, then run again",
            exc,
        )
    # a damaged page found by a query, a disk error, a PostgreSQL server gone (asyncpg's OSError on a new
    # connection, which SQLAlchemy does not wrap; an output's own failures are answered before, by `writing`)
    except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
        failure = database_failure(exc, str(path) if path is not None else shown_url(settings.database_url), path)
        if failure is None:
            raise
        fail(f"database failed: {failure}", exc)


def _kept_files(database: Path | None) -> list[Path]:
    """The files toolwise keeps for a database: an SQLite file and its journals, and its dead letters."""
    from toolwise.feedback.deadletter import DeadLetters, dead_letter_file

    letters = DeadLetters(dead_letter_file(database))
    journals = [database.with_name(database.name + end) for end in ("-wal", "-shm", "-journal")] if database else []
    return [*([database] if database else []), *journals, letters.path, letters.reserve_path, *letters.fallbacks]


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through links too)."""
    if a.resolve() == b.resolve():
        return True
    return a.exists() and b.exists() and os.path.samefile(a, b)


def sqlite_file_or_exit(database_url: str, *, must_exist: bool) -> Path | None:
    """The SQLite file of `database_url` (None: another database); with `must_exist`, exit 1 saying so when
    there is none: a command that only reads would leave an empty database behind, on a path maybe mistyped."""
    from toolwise.feedback.engine import sqlite_path

    with database_or_exit():
        path = sqlite_path(database_url)
    if must_exist and path is not None and not path.exists():
        fail(
            f"no database at {path}: nothing was recorded there yet (`toolwise serve` records into it; "
            "`toolwise demo` into a database of its own, and it prints how to read that one)",
            code=1,
        )
    return path


async def current(settings: Settings, feedback: FeedbackService) -> Services:
    """The services with a learner in the state of the newest usable snapshot, with the log after it
    replayed."""
    from toolwise.server.services import Services  # the learning services and the server: only here

    services = Services.open(settings, feedback)
    await services.snapshots.restore_latest()
    return services
