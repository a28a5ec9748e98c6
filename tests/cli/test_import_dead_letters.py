"""`toolwise import-dead-letters` puts the calls a refusing database sent to a dead-letter file back."""

from __future__ import annotations

import asyncio
from pathlib import Path

from typer.testing import CliRunner

from tests.feedback.conftest import make_execution
from toolwise.cli.main import app
from toolwise.feedback import FeedbackService
from toolwise.feedback.arguments import canonical_json
from toolwise.feedback.rows import ExecutionRows


def test_dead_letters_are_imported_once(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"

    async def dead_letter() -> Path:
        async with FeedbackService(url) as svc:
            svc._dead_letter(make_execution(), OSError(28, "No space left on device"))  # the writer's last resort
            return svc.dead_letter_path

    async def count() -> int:
        async with FeedbackService(url) as svc:
            return await svc.reads.count_executions("default")

    dead = asyncio.run(dead_letter())
    assert asyncio.run(count()) == 0
    first = CliRunner().invoke(app, ["import-dead-letters", str(dead), "--database-url", url])
    assert first.exit_code == 0 and "1 executions imported, 0 already in the database" in first.output, first.output
    again = CliRunner().invoke(app, ["import-dead-letters", str(dead), "--database-url", url])
    assert "0 executions imported, 1 already in the database" in again.output, again.output
    assert asyncio.run(count()) == 1


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    result = CliRunner().invoke(app, ["import-dead-letters", str(tmp_path / "nope.jsonl"), "--database-url", url])
    assert result.exit_code == 2 and "no dead-letter file at" in result.output
    assert not (tmp_path / "toolwise.db").exists()


def test_a_file_that_is_not_a_dead_letter_file_is_refused_before_any_database_is_made(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"hello": "world"}\n')
    result = CliRunner().invoke(app, ["import-dead-letters", str(notes), "--database-url", url])
    assert result.exit_code == 2, result.output
    assert f"{notes}, line 1: not a dead letter of toolwise" in result.output
    assert not (tmp_path / "toolwise.db").exists()


def test_a_dead_letter_lacking_a_column_is_imported_or_named(tmp_path: Path) -> None:
    """A record without the columns a later toolwise added (nullable: `instance`, `explored`) is imported
    with them empty; one without a column the log cannot do without is named with its line, before any
    database is made, instead of a traceback from the insert."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    rows = ExecutionRows(salt=b"", store_arguments=False, store_queries=True, redact_pattern="x^")
    older, broken = rows.named(make_execution("s__older")), rows.named(make_execution("s__broken"))
    del older["instance"], older["explored"], broken["tool"]
    letters = tmp_path / "letters.jsonl"
    letters.write_text(canonical_json({"error": "full", "execution": broken}) + "\n")
    refused = CliRunner().invoke(app, ["import-dead-letters", str(letters), "--database-url", url])
    said = " ".join(refused.output.split())
    assert refused.exit_code == 2 and f"{letters}, line 1: not a dead letter of toolwise (no tool)" in said, said
    assert not (tmp_path / "toolwise.db").exists()
    letters.write_text(canonical_json({"error": "full", "execution": older}) + "\n")
    imported = CliRunner().invoke(app, ["import-dead-letters", str(letters), "--database-url", url])
    assert imported.exit_code == 0 and "1 executions imported" in imported.output, imported.output
