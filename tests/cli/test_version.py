"""`toolwise --version` prints the installed distribution's version, where it runs from, and runs no command."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

from typer.testing import CliRunner

import toolwise
from toolwise.cli.main import app


def test_version_prints_the_package_version_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    where = Path(toolwise.__file__).parent
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert result.output.strip() == f"toolwise {version('toolwise')} from {where} (python {python})"
