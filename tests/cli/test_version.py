"""`toolwise --version` prints the installed distribution's version and runs no command."""

from __future__ import annotations

from importlib.metadata import version

from typer.testing import CliRunner

from toolwise.cli.main import app


def test_version_prints_the_package_version_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"toolwise {version('toolwise')}"
