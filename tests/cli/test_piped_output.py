"""An `inspect` view piped on (`| head`, `> file`) starts with its content: the spinner shown while a
command waits leaves no empty line behind where stdout is no terminal."""

from __future__ import annotations

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
