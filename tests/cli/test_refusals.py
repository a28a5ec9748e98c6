"""What the user asked wrong ends an admin command with one line naming it, exit 1; a bug is not dressed
as one: it keeps its traceback (cli/database.py `run` answers only `UserError`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.cli.test_views import fill
from toolwise.cli.main import app as cli
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.reports import LogReports


def database(tmp_path: Path) -> str:
    """An empty database of toolwise's (migrated), as `serve` leaves one."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"

    async def create() -> None:
        async with FeedbackService(url):
            pass

    asyncio.run(create())
    return url


def refused(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, args)
    said = " ".join(result.output.split())  # the console wraps a long message at its width
    assert result.exit_code == 1 and said.startswith("toolwise: ") and message in said, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def test_a_snapshot_the_database_lacks_is_refused_in_one_line(tmp_path: Path) -> None:
    url = database(tmp_path)
    out = str(tmp_path / "s.snapshot")
    refused(["snapshot", "dump", "--database-url", url, "--id", "7", "-o", out], "no snapshot 7 in namespace 'default'")


def test_a_candidate_policy_asked_wrong_is_refused_in_one_line(tmp_path: Path) -> None:
    url = database(tmp_path)
    refused(["inspect", "evaluate", "greedy", "--database-url", url], "policy must be one of")
    refused(
        ["inspect", "evaluate", "thompson", "--epsilon", "0.1", "--database-url", url], "policy 'thompson' has no ε"
    )
    refused(["inspect", "evaluate", "ucb", "--epsilon", "2", "--database-url", url], "inspect evaluate: epsilon: Input")


def test_a_file_that_is_not_a_dead_letter_is_refused_in_one_line(tmp_path: Path) -> None:
    """Read before the database is opened: a file the command cannot use, exit 2 (docs/startup-errors.md)."""
    url = database(tmp_path)
    for name, content in (("notes.jsonl", b'{"execution": {}}\n'), ("binary.jsonl", b"\xff\xfe\x00\n")):
        (tmp_path / name).write_bytes(content)
        result = CliRunner().invoke(cli, ["import-dead-letters", str(tmp_path / name), "--database-url", url])
        said = " ".join(result.output.split())  # the console wraps a long message at its width
        assert result.exit_code == 2 and said.startswith("toolwise: "), result.output
        assert "line 1: not a dead letter" in said and "Traceback" not in said


def test_a_bug_is_not_shown_as_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ValueError from a bug in a command's body propagates with its traceback, not as the user's fault."""
    url = database(tmp_path)

    async def broken(self: LogReports, namespace: str = "default") -> list[object]:
        raise ValueError("a bug in the code")

    monkeypatch.setattr(LogReports, "action_summary", broken)
    result = CliRunner().invoke(cli, ["inspect", "top-actions", "--database-url", url])
    assert isinstance(result.exception, ValueError) and str(result.exception) == "a bug in the code"
    assert "toolwise: a bug in the code" not in result.output


def test_a_refusal_quotes_what_the_user_typed_whole_brackets_included(tmp_path: Path) -> None:
    url = database(tmp_path)  # the console reads "[x]" as a style tag unless the message is escaped
    refused(["inspect", "evaluate", "greedy[x]", "--database-url", url], "got 'greedy[x]'")


def test_qvalues_without_a_snapshot_of_the_tools_is_refused_saying_when_there_will_be_one(tmp_path: Path) -> None:
    """`inspect qvalues` on a log no snapshot covers yet (a first `serve` still running) ended in a traceback,
    `ValueError: zero-size array to reduction operation maximum`."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    fill(url, utcnow())
    refused(["inspect", "qvalues", "--database-url", url], "no snapshot of the learned state holds the tools yet")


def test_install_without_a_client_config_is_a_refusal_exit_1_not_a_start_up_error(tmp_path: Path) -> None:
    """docs/startup-errors.md: 1 is a command that ran and refused (install's refusals), 2 toolwise
    not starting; install found nothing to install."""
    refused(["install", "--path", str(tmp_path / "mcp.json")], f"no config at {tmp_path / 'mcp.json'}")


def test_install_path_naming_the_project_folder_is_a_refusal_naming_the_file_to_pass(tmp_path: Path) -> None:
    """`install --path ~/myproject` (the folder, not its .mcp.json) ended in a traceback
    (IsADirectoryError); a missing file named by --path was answered "pass --path for a config elsewhere"."""
    refused(
        ["install", "--path", str(tmp_path)],
        f"{tmp_path} is a folder: name the config file in it, e.g. --path {tmp_path / '.mcp.json'}",
    )
    refused(["install", "--path", str(tmp_path), "--undo"], f"{tmp_path} is a folder")
    result = CliRunner().invoke(cli, ["install", "--path", str(tmp_path / ".mcp.json")])
    assert result.exit_code == 1 and "pass --path" not in result.output, result.output


def test_an_export_whose_since_is_not_before_its_until_is_refused_not_written_empty(tmp_path: Path) -> None:
    """Swapped dates wrote an export with no record and exited 0, as if nothing had happened in between."""
    out = tmp_path / "out.jsonl"
    args = ["inspect", "export", "-o", str(out), "--database-url", database(tmp_path)]
    refused([*args, "--since", "2026-11-28", "--until", "2026-11-01"], "--since 2026-11-28 00:00 is not before")
    assert not out.exists()


@pytest.mark.parametrize("command", [["inspect", "top-actions"], ["inspect", "qvalues"]])
@pytest.mark.parametrize("limit", ["0", "-2"])
def test_a_row_limit_below_one_is_a_usage_error(tmp_path: Path, command: list[str], limit: str) -> None:
    """`--limit 0` printed an empty table and `--limit -2` every row (SQL's LIMIT -2 is none)."""
    result = CliRunner().invoke(cli, [*command, "--limit", limit, "--database-url", database(tmp_path)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "Invalid value for '--limit': Input should be greater than or equal to 1" in said
