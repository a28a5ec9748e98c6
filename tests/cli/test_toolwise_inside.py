"""A client's own config, once `toolwise install` has put toolwise in it, serves toolwise itself: `serve -c`
on it would run toolwise inside toolwise on the same database. `serve` refuses it in one line naming the
entry and the config to serve instead (exit 2, before anything is opened); `doctor` says so, not starting it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

from toolwise.cli import clients, install
from toolwise.cli.clients import Client
from toolwise.cli.main import app


def installed_claude_desktop() -> Path:
    """Claude Desktop's config after `toolwise install`: its one server is toolwise's entry."""
    path = clients.client_config_path(Client.claude_desktop, "linux")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}}, indent=2))
    install.run(Client.claude_desktop, None, dry_run=False, undo_it=False)
    assert list(json.loads(path.read_text())["mcpServers"]) == ["toolwise"]
    return path


def test_serving_a_client_config_that_starts_toolwise_is_refused_naming_the_config_to_serve(home: Path) -> None:
    client_config = installed_claude_desktop()
    ours = clients.toolwise_config_path(Client.claude_desktop, None)
    result = CliRunner().invoke(app, ["serve", "--config", str(client_config)])
    said = " ".join(result.output.split())  # the console wraps a long message at its width
    assert result.exit_code == 2 and said.startswith("toolwise: "), result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert "server 'toolwise' starts toolwise itself" in said and f"toolwise serve --config {ours}" in said
    assert not list(home.rglob("*.db"))  # refused before any database is opened or made


def test_a_hand_written_entry_that_runs_python_m_toolwise_is_refused_too(home: Path) -> None:
    config = home / "mine.json"
    entry: dict[str, object] = {"command": sys.executable, "args": ["-m", "toolwise", "serve"]}
    config.write_text(json.dumps({"mcpServers": {"tw": entry, "time": {"command": "mcp-server-time"}}}))
    result = CliRunner().invoke(app, ["serve", "-c", str(config)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "server 'tw' starts toolwise itself" in said, result.output
    assert "toolwise install" in said  # nothing installed: how to get a toolwise config
    entry["disabled"] = True  # kept in the file, never started: nothing runs inside toolwise
    config.write_text(json.dumps({"mcpServers": {"tw": entry}}))
    assert "starts toolwise itself" not in CliRunner().invoke(app, ["doctor", "-c", str(config)]).output


def test_doctor_says_a_client_config_serves_toolwise_and_which_config_to_check(home: Path) -> None:
    client_config = installed_claude_desktop()
    ours = clients.toolwise_config_path(Client.claude_desktop, None)
    result = CliRunner().invoke(app, ["doctor", "--config", str(client_config)])
    assert result.exit_code == 1, result.output
    said = " ".join(result.output.split())
    assert "FAIL server 'toolwise': starts toolwise itself" in said and f"toolwise doctor --config {ours}" in said
    assert "1 problem(s) found" in said


def test_doctor_on_a_client_config_toolwise_cannot_load_says_it_is_a_client_s_config(home: Path) -> None:
    """A client's own config may hold entries toolwise refuses (an SSE server): doctor cannot check it, and
    says it is the client's config and which one to check, not only "invalid config"."""
    client_config = installed_claude_desktop()
    ours = clients.toolwise_config_path(Client.claude_desktop, None)
    raw = json.loads(client_config.read_text())
    raw["mcpServers"]["events"] = {"type": "sse", "url": "https://example.com/sse"}
    client_config.write_text(json.dumps(raw))
    result = CliRunner().invoke(app, ["doctor", "--config", str(client_config)])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and said.startswith("toolwise: "), result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert "is an MCP client's config, not toolwise's" in said and "server 'toolwise' starts toolwise itself" in said
    assert f"toolwise doctor --config {ours}" in said
