"""An `inspect` view piped on (`| head`, `> file`) starts with its content: the spinner shown while a
command waits leaves no empty line behind where stdout is no terminal."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.server.test_evaluation import cli_config
from toolwise.cli.main import app as cli


@pytest.mark.parametrize(
    "command",
    [["progress"], ["evaluate", "linucb", "--epsilon", "0.1"], ["top-actions"], ["status"], ["export", "-o", "{out}"]],
)
def test_an_inspect_view_on_a_pipe_starts_with_its_content(tmp_path: Path, command: list[str]) -> None:
    config = cli_config(tmp_path)
    args = [a.replace("{out}", str(tmp_path / "log.jsonl")) for a in command]
    result = CliRunner().invoke(cli, ["inspect", *args, *config], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() and not result.stdout[0].isspace(), repr(result.stdout[:80])


@pytest.mark.parametrize(
    "terminal", [{}, {"FORCE_COLOR": "1", "TERM": "dumb"}], ids=["pipe", "terminal-that-cannot-redraw"]
)
def test_the_demo_where_its_bar_cannot_redraw_prints_no_bar_and_no_blank_line(
    tmp_path: Path, terminal: dict[str, str]
) -> None:
    """`toolwise demo | tee demo.txt` (or a TERM=dumb shell): the bar, which cannot move there, is left out;
    rich's Progress would print its last frame and, on a terminal it cannot redraw, an empty line after it."""
    database = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    env = {"COLUMNS": "80", **terminal}
    result = CliRunner().invoke(cli, ["demo", "--calls", "2", "--database-url", database], env=env)
    assert result.exit_code == 0, result.output
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", result.stdout).splitlines()  # colours forced, or not
    assert "" not in lines and not [line for line in lines if line.startswith("tool calls ")], lines[:6]
