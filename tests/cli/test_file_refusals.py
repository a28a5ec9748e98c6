"""A file an admin command is given that is missing, unreadable or not what it should be ends the command
with one line naming it, exit 2, before its database is opened: a restore's file that cannot seed a new
database leaves none behind, an export to a folder that does not exist computes nothing."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_refusals import database
from toolwise.cli.main import app as cli


def ended(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(cli, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    said = " ".join(result.output.split())  # the console wraps a long line at its width
    assert "Traceback" not in said
    return result.exit_code, said


def restore(tmp_path: Path, file: Path, *more: str) -> tuple[int, str]:
    """`snapshot restore -i FILE` on a database that does not exist yet."""
    return ended(
        ["snapshot", "restore", "-i", str(file), *more, "--database-url", f"sqlite+aiosqlite:///{new(tmp_path)}"]
    )


def new(tmp_path: Path) -> Path:
    return tmp_path / "new" / "toolwise.db"


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Where the database would be made: a folder with nothing in it."""
    new(tmp_path).parent.mkdir()
    return new(tmp_path).parent


def test_a_missing_snapshot_file_is_named_and_no_database_is_made(tmp_path: Path, folder: Path) -> None:
    code, said = restore(tmp_path, tmp_path / "state.snapshot")
    assert code == 2 and said == f"toolwise: {tmp_path / 'state.snapshot'}: no such file"
    assert list(folder.iterdir()) == []


def test_a_file_that_is_no_snapshot_is_named_and_no_database_is_made(tmp_path: Path, folder: Path) -> None:
    notes = tmp_path / "notes.snapshot"
    notes.write_text("my notes")
    code, said = restore(tmp_path, notes)
    assert code == 2 and said.startswith(f"toolwise: {notes}: not a toolwise snapshot (BadZipFile")
    code, said = restore(tmp_path, tmp_path)
    assert code == 2 and said == f"toolwise: {tmp_path}: cannot read it (Is a directory)"
    assert list(folder.iterdir()) == []


def test_a_snapshot_refused_or_a_missing_key_makes_no_database(tmp_path: Path, folder: Path) -> None:
    file = tmp_path / "state.snapshot"
    dumped = ended(["snapshot", "dump", "-o", str(file), "--database-url", database(tmp_path)])
    assert dumped[0] == 0, dumped
    ended(["snapshot", "keygen", "--private", str(tmp_path / "k.pem"), "--public", str(tmp_path / "k.pub")])
    code, said = restore(tmp_path, file, "--verify-key", str(tmp_path / "k.pub"))
    assert code == 1 and said == f"toolwise: {file}: snapshot is not signed, but a verify key was given"
    code, said = restore(tmp_path, file, "--verify-key", str(tmp_path / "none.pub"))
    assert code == 2 and said == f"toolwise: {tmp_path / 'none.pub'}: no such key file"
    assert list(folder.iterdir()) == []
    code, said = restore(tmp_path, file)  # a snapshot file still seeds a new database
    assert code == 0 and said.startswith("restored snapshot as #1 (restore)") and new(tmp_path).exists()


@pytest.mark.parametrize("command", [["inspect", "export"], ["inspect", "plot"], ["snapshot", "dump"]])
def test_an_output_in_place_of_a_folder_is_refused_in_one_line(tmp_path: Path, command: list[str]) -> None:
    code, said = ended([*command, "-o", str(tmp_path), "--database-url", database(tmp_path)])
    assert code == 2 and said.startswith(f"toolwise: {tmp_path} is a folder: name the file to write in it")


@pytest.mark.parametrize("command", [["inspect", "export"], ["inspect", "plot"]])
def test_an_output_in_a_folder_that_does_not_exist_is_refused_in_one_line(tmp_path: Path, command: list[str]) -> None:
    out = tmp_path / "missing" / "out"
    code, said = ended([*command, "-o", str(out), "--database-url", database(tmp_path)])
    told = f"cannot write {out}: there is no folder {out.parent}; make it first, or name a file in one that exists"
    assert code == 2 and said == f"toolwise: {told}"
    assert not out.parent.exists()


def test_the_configured_verify_key_refuses_a_snapshot_before_any_database_is_made(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --verify-key a restore verifies with the config's `snapshot_verify_key` (here its TOOLWISE_*
    variable): its refusal, or its key file missing, is said as --verify-key's is and leaves no database."""
    file = tmp_path / "state.snapshot"
    assert ended(["snapshot", "dump", "-o", str(file), "--database-url", database(tmp_path)])[0] == 0
    ended(["snapshot", "keygen", "--private", str(tmp_path / "k.pem"), "--public", str(tmp_path / "k.pub")])
    monkeypatch.setenv("TOOLWISE_SNAPSHOT_VERIFY_KEY", str(tmp_path / "k.pub"))
    code, said = restore(tmp_path, file)
    assert code == 1 and said == f"toolwise: {file}: snapshot is not signed, but a verify key was given"
    monkeypatch.setenv("TOOLWISE_SNAPSHOT_VERIFY_KEY", str(tmp_path / "none.pub"))
    code, said = restore(tmp_path, file)
    assert code == 2 and said == f"toolwise: {tmp_path / 'none.pub'}: no such key file"
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("given", [[], ["--previous", "--id", "1"]])
def test_a_restore_that_names_no_snapshot_or_two_says_which_options_name_one(
    tmp_path: Path, folder: Path, given: list[str]
) -> None:
    code, said = ended(["snapshot", "restore", *given, "--database-url", f"sqlite+aiosqlite:///{new(tmp_path)}"])
    assert (code, said) == (
        2,
        "toolwise: name the one snapshot to restore: --id N (`toolwise snapshot list` shows them), --input FILE "
        "or --previous",
    )
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", [["inspect", "export"], ["inspect", "plot"], ["snapshot", "dump"]])
@pytest.mark.parametrize("kept", ["toolwise.db", "toolwise.db-wal", "toolwise-dead-letter.jsonl"])
def test_an_output_naming_the_database_or_its_dead_letters_is_refused_and_they_are_kept(
    tmp_path: Path, command: list[str], kept: str
) -> None:
    """`-o` given the database itself (or its write-ahead log, or the dead-letter file beside it, a
    `.jsonl` as an export is) would be truncated before it is read: refused, the file untouched."""
    url = database(tmp_path)
    target = tmp_path / kept
    if not target.exists():
        target.write_bytes(b"kept\n")
    before = target.read_bytes()
    code, said = ended([*command, "-o", str(target), "--database-url", url])
    assert code == 2 and said.startswith(f"toolwise: {target} is a file toolwise keeps for the database"), said
    assert target.read_bytes() == before


def test_an_export_to_stdout_is_json_lines_alone_and_its_report_goes_to_stderr(tmp_path: Path) -> None:
    """`-o /dev/stdout` (to pipe the export on): every line on stdout is one JSON record; what the command
    says about it goes to stderr, not into the stream."""
    url = database(tmp_path)
    ran = subprocess.run(
        [sys.executable, "-m", "toolwise", "inspect", "export", "-o", "/dev/stdout", "--database-url", url],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.decode().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["export"], lines
    assert "wrote /dev/stdout: 0 executions, 0 ratings" in ran.stderr.decode()


def test_keygen_into_a_folder_that_does_not_exist_or_one_file_for_both_keys_is_refused(tmp_path: Path) -> None:
    """A key pair whose files cannot both be written is refused before either is: no private key left
    without its public one, and never the public key written over the private key in one file."""
    missing = tmp_path / "missing" / "k.pub"
    code, said = ended(["snapshot", "keygen", "--private", str(tmp_path / "k.pem"), "--public", str(missing)])
    assert code == 2 and said.startswith(f"toolwise: cannot write {missing}: there is no folder {missing.parent};")
    assert list(tmp_path.iterdir()) == []
    both = tmp_path / "k.pem"
    code, said = ended(["snapshot", "keygen", "--private", str(both), "--public", str(both)])
    assert code == 2 and said == f"toolwise: --private and --public name one file ({both}): name two"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full (a disk that is always full) is Linux's")
@pytest.mark.parametrize("command", [["inspect", "export"], ["snapshot", "dump"]])
def test_an_output_the_disk_has_no_room_for_is_one_line_naming_it(tmp_path: Path, command: list[str]) -> None:
    code, said = ended([*command, "-o", "/dev/full", "--database-url", database(tmp_path)])
    assert code == 2 and said == "toolwise: cannot write /dev/full: No space left on device", said


def test_an_export_cut_short_by_a_full_disk_leaves_no_part_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What was written before the disk filled would pass for the whole export: it is removed."""
    url, out = database(tmp_path), tmp_path / "out.jsonl"

    class FullAfterTheHeader(io.BytesIO):
        def write(self, data: bytes) -> int:  # type: ignore[override]
            if out.exists() and out.stat().st_size:
                raise OSError(28, "No space left on device")
            with out.open("ab") as file:
                return file.write(data)

    monkeypatch.setattr("toolwise.cli.common.open_private", lambda path: FullAfterTheHeader())
    monkeypatch.setattr("toolwise.feedback.export.execution_chunks", lambda *a, **k: one_chunk())
    code, said = ended(["inspect", "export", "-o", str(out), "--database-url", url])
    assert code == 2 and said == f"toolwise: cannot write {out}: No space left on device", said
    assert not out.exists()


async def one_chunk() -> AsyncIterator[tuple[int, bytes]]:
    yield 1, b'{"type": "execution"}\n'


def test_a_refused_export_to_stdout_says_why_on_stderr_and_leaves_the_stream_empty(tmp_path: Path) -> None:
    """`-o /dev/stdout` piped on: a command refused (no database there yet) puts nothing into the stream
    the next program reads; why it was refused goes to stderr, where the user sees it."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'none.db'}"
    ran = subprocess.run(
        [sys.executable, "-m", "toolwise", "inspect", "export", "-o", "/dev/stdout", "--database-url", url],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 1
    assert ran.stdout == b""
    assert "nothing was recorded there yet" in ran.stderr.decode()


def test_an_export_whose_database_fails_midway_names_the_database_not_the_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read that fails between two writes (a PostgreSQL server gone: asyncpg's ConnectionRefusedError, an
    OSError that SQLAlchemy does not wrap) was taken for the output's: `cannot write out.jsonl: Connect call
    failed`, sending the user to a file and a disk that were fine."""
    url, out = database(tmp_path), tmp_path / "out.jsonl"

    async def lost_after_one_chunk(*args: object, **kwargs: object) -> AsyncIterator[tuple[int, bytes]]:
        yield 1, b'{"type": "execution"}\n'
        raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")

    monkeypatch.setattr("toolwise.feedback.export.execution_chunks", lost_after_one_chunk)
    code, said = ended(["inspect", "export", "-o", str(out), "--database-url", url])
    assert code == 2 and "cannot write" not in said, said
    assert said.startswith("toolwise: database failed: ") and "Connect call failed" in said, said


def damaged() -> sqlite3.DatabaseError:
    """A damaged page met midway, as an export's worker reports it."""
    failure = sqlite3.DatabaseError("database disk image is malformed")
    failure.sqlite_errorcode = sqlite3.SQLITE_CORRUPT
    return failure


@pytest.mark.parametrize(
    "failure",
    [
        ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)"),
        damaged(),
    ],
)
def test_an_export_cut_short_by_its_database_leaves_no_part_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: Exception
) -> None:
    """What was written before the database failed would pass for the whole export, as what a full disk cut
    short would: it is removed too."""
    url, out = database(tmp_path), tmp_path / "out.jsonl"

    async def failing_after_one_chunk(*args: object, **kwargs: object) -> AsyncIterator[tuple[int, bytes]]:
        yield 1, b'{"type": "execution"}\n'
        raise failure

    monkeypatch.setattr("toolwise.feedback.export.execution_chunks", failing_after_one_chunk)
    code, said = ended(["inspect", "export", "-o", str(out), "--database-url", url])
    assert code == 2 and said.startswith("toolwise: database failed: "), said
    assert not out.exists()
