"""A database that is the user's to mend (damaged under a command, made by a newer toolwise, not taking writes)
ends an admin command with one line naming it and what to do, exit 2, the traceback only under --debug;
a bug's database error keeps its traceback."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tests.feedback.conftest import make_execution
from toolwise.cli.main import app as cli
from toolwise.feedback import FeedbackService, StoreUnavailableError
from toolwise.feedback.engine import check_database_url
from toolwise.feedback.reports import LogReports

DAMAGED = "is damaged: stop toolwise, copy what can be read with `sqlite3"


def recorded(tmp_path: Path, calls: int = 400) -> Path:
    """A database of toolwise's with `calls` executions in it, checkpointed into its one file."""
    path = tmp_path / "toolwise.db"

    async def record() -> None:
        async with FeedbackService(f"sqlite+aiosqlite:///{path}") as feedback:
            for n in range(calls):
                await feedback.log.record_execution(make_execution(session_id=f"s{n % 7}", query=f"request {n}"))
            await feedback.flush()

    asyncio.run(record())
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def damage_past_the_schema(path: Path) -> None:
    """Overwrite the file's second half: the schema, the version and the secrets (its first pages) still
    read, so the database opens and the damage is found by a command's query."""
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.seek(size // 2)
        file.write(b"\xa5" * (size - size // 2))


def invoke(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, " ".join(result.output.split())  # the console wraps a long line at its width


@pytest.mark.parametrize(
    "command",
    [
        ["inspect", "progress"],
        ["inspect", "qvalues"],
        ["inspect", "evaluate", "ucb"],
        ["inspect", "export", "-o", "{tmp}/out.jsonl"],
        ["snapshot", "dump", "-o", "{tmp}/s.snapshot"],
    ],
)
def test_a_database_found_damaged_by_a_command_is_one_line_saying_what_to_do(
    tmp_path: Path, command: list[str]
) -> None:
    path = recorded(tmp_path)
    damage_past_the_schema(path)
    args = [*(word.format(tmp=tmp_path) for word in command), "--database-url", f"sqlite+aiosqlite:///{path}"]
    code, said = invoke(args)
    assert code == 2 and said.startswith(
        f"toolwise: database failed: {path}: DatabaseError: database disk image is malformed"
    )
    assert DAMAGED in said and "Traceback" not in said
    code, said = invoke(["--debug", *args])
    assert code == 2 and "Traceback" in said and DAMAGED in said


def test_a_file_that_is_no_database_is_one_line_saying_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database " * 200)
    code, said = invoke(["snapshot", "list", "--database-url", f"sqlite+aiosqlite:///{path}"])
    assert code == 2 and said.startswith(f"toolwise: unusable database: {path}: DatabaseError: file is not a database")
    assert "it is no SQLite database (the wrong file?) or is damaged" in said


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ("sqlite:///{path}", "give sqlite+aiosqlite:///{path}"),
        ("postgresql://me:pw@db/tw", "give postgresql+asyncpg://me:***@db/tw"),
        ("postgres://me:pw@db/tw", "give postgresql+asyncpg://me:***@db/tw"),
        ("postgresql+psycopg2://me:pw@db/tw", "give postgresql+asyncpg://me:***@db/tw"),
        ("sqlite+pysqlite:///{path}", "give sqlite+aiosqlite:///{path}"),
        ("me:pw at db", "is no URL: give sqlite+aiosqlite:///PATH or postgresql+asyncpg://"),
    ],
)
def test_a_url_that_is_none_or_has_no_async_driver_says_which_url_to_give(
    tmp_path: Path, given: str, wanted: str
) -> None:
    """`--database-url sqlite:///…` (SQLAlchemy's usual spelling) said `InvalidRequestError: The asyncio
    extension requires an async driver…`, `postgres://…` `NoSuchModuleError`, and a string that is no URL
    printed a traceback."""
    path = recorded(tmp_path, calls=1)
    code, said = invoke(["inspect", "status", "--database-url", given.format(path=path)])
    assert code == 2 and wanted.format(path=path) in said, said
    assert "Error" not in said and "pw" not in said
    config = tmp_path / "toolwise.json"
    config.write_text('{"mcpServers": {}}')
    doctor = CliRunner().invoke(cli, ["doctor", "-c", str(config), "--database-url", given.format(path=path)])
    assert doctor.exit_code == 1 and "FAIL database: " in doctor.output, doctor.output
    assert wanted.format(path=path) in " ".join(doctor.output.split())


@pytest.mark.parametrize(
    ("given", "wanted"),
    [
        ("foo://me:pw@db/tw", "foo://me:***@db/tw: SQLAlchemy knows no database 'foo': give sqlite+aiosqlite:///PATH"),
        (
            "mysql+aiomysql://me:pw@db/tw",
            "mysql+aiomysql://me:***@db/tw: its driver is not installed (No module named 'aiomysql'): install it"
            " into toolwise's environment, or give sqlite+aiosqlite:///PATH",
        ),
    ],
)
def test_a_url_of_an_unknown_database_or_a_missing_driver_is_one_line(given: str, wanted: str) -> None:
    """`--database-url foo://…` (a typo) printed SQLAlchemy's `NoSuchModuleError` traceback, and a URL
    whose async driver is not installed `ModuleNotFoundError`'s, where a start-up problem is one line."""
    for command in (["inspect", "status"], ["snapshot", "list"]):
        code, said = invoke([*command, "--database-url", given])
        assert code == 2 and said.startswith(f"toolwise: unusable database: {wanted}"), said
        assert "pw@" not in said


def test_a_database_of_a_newer_toolwise_says_to_upgrade(tmp_path: Path) -> None:
    path = recorded(tmp_path, calls=1)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    code, said = invoke(["inspect", "status", "--database-url", f"sqlite+aiosqlite:///{path}"])
    assert code == 2 and "schema is at revision 9999" in said
    assert "a newer toolwise made it; upgrade toolwise" in said and "Traceback" not in said


def test_a_database_that_takes_no_writes_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = recorded(tmp_path, calls=1)
    (tmp_path / "dead.jsonl").write_bytes(b"")

    async def refused(self: FeedbackService, rows: list[dict[str, Any]]) -> tuple[int, int]:
        raise StoreUnavailableError("the database is failing: OperationalError: disk I/O error; 1 records are waiting")

    monkeypatch.setattr(FeedbackService, "import_dead_letter_rows", refused)
    code, said = invoke(
        ["import-dead-letters", str(tmp_path / "dead.jsonl"), "--database-url", f"sqlite+aiosqlite:///{path}"]
    )
    assert code == 2 and said.startswith("toolwise: database failed: the database is failing: OperationalError: disk")
    assert "then run again" in said and "Traceback" not in said


def test_a_bugs_sql_error_keeps_its_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query of toolwise's that is wrong is a bug, not the database's situation: not dressed as one."""
    path = recorded(tmp_path, calls=1)

    async def wrong(self: LogReports, namespace: str = "default") -> list[object]:
        async with self._database.engine.connect() as conn:
            await conn.execute(text("SELECT no_such_column FROM executions"))
        return []

    monkeypatch.setattr(LogReports, "action_summary", wrong)
    result = CliRunner().invoke(cli, ["inspect", "top-actions", "--database-url", f"sqlite+aiosqlite:///{path}"])
    assert result.exit_code == 1 and "no such column" in str(result.exception)
    assert "database failed" not in result.output


@pytest.mark.parametrize("url", ["postgresql+psycopg://me:pw@db/tw", "postgresql+asyncpg://me:pw@db/tw"])
def test_a_url_naming_a_driver_with_an_async_variant_is_taken(url: str) -> None:
    """`postgresql+psycopg://…` is an async URL to SQLAlchemy (psycopg 3 has both): create_async_engine
    takes it, so toolwise must not refuse it as a synchronous driver."""
    check_database_url(url)  # no DatabaseUnusableError
