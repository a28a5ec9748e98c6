"""The demo's one line for a missing downstream names an install command that works where toolwise is
installed: a `uv tool` environment has no pip, and a `pipx` one is its tool manager's."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwise.cli.main import app

ABSENT = "mcp-server-absent"


@pytest.mark.parametrize(
    ("marker", "hint"),
    [
        ("uv-receipt.toml", f"install with: uv tool install {ABSENT}"),
        ("pipx_metadata.json", f"install with: pipx install {ABSENT}"),
        (None, f"-m pip install {ABSENT}"),
    ],
)
def test_the_demo_says_how_to_install_a_missing_server_with_the_tool_that_installed_toolwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str | None, hint: str
) -> None:
    environment = tmp_path / "env"
    environment.mkdir()
    if marker is not None:
        (environment / marker).write_text("")
    monkeypatch.setattr(sys, "prefix", str(environment))
    config = tmp_path / "demo.json"
    config.write_text(json.dumps({"mcpServers": {"gone": {"command": ABSENT}}}))
    result = CliRunner().invoke(app, ["demo", "--config", str(config), "--calls", "1"])
    assert result.exit_code == 1 and f"{ABSENT} not installed" in result.output, result.output
    assert hint in result.output and (marker is None or "-m pip" not in result.output)
