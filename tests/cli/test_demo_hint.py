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


def installed_by(marker: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """toolwise runs from an environment that `marker` says uv (`uv-receipt.toml`), pipx or (None) pip made."""
    environment = tmp_path / "env"
    environment.mkdir()
    if marker is not None:
        (environment / marker).write_text("")
    monkeypatch.setattr(sys, "prefix", str(environment))


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
    installed_by(marker, tmp_path, monkeypatch)
    config = tmp_path / "demo.json"
    config.write_text(json.dumps({"mcpServers": {"gone": {"command": ABSENT}}}))
    result = CliRunner().invoke(app, ["demo", "--config", str(config), "--calls", "1"])
    assert result.exit_code == 1 and f"{ABSENT} not installed" in result.output, result.output
    assert hint in result.output and (marker is None or "-m pip" not in result.output)


@pytest.mark.parametrize(
    ("marker", "hint"),
    [
        ("uv-receipt.toml", f"uv pip install --python {sys.executable} matplotlib"),
        ("pipx_metadata.json", "pipx inject toolwise matplotlib"),
        (None, f"{sys.executable} -m pip install matplotlib"),
    ],
)
def test_plot_without_matplotlib_says_how_to_add_it_beside_toolwise_never_toolwise_from_a_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str | None, hint: str
) -> None:
    installed_by(marker, tmp_path, monkeypatch)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # not installed: importing it raises ImportError
    result = CliRunner().invoke(app, ["inspect", "plot", "--output", str(tmp_path / "curves.png")])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and said.endswith(f"not installed beside this toolwise: {hint}"), said
    assert "toolwise[plot]" not in said
