"""Claude Code keeps a user scope and a scope per project in ~/.claude.json; `install` gives each a toolwise
config of its own. `toolwise doctor`, which install's last line tells the user to run, and `inspect`, which
reads the one database they share, work without --config; `serve` asks which one, naming each project."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from toolwise.cli import clients, install
from toolwise.cli.clients import Client
from toolwise.cli.main import app


def closed_url() -> str:
    """A server nothing answers: doctor's check of it fails at once."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{closed.getsockname()[1]}/mcp"


def install_user_and_project_scopes() -> None:
    path = clients.client_config_path(Client.claude_code, "linux")
    scopes = {
        "mcpServers": {"mine": {"type": "http", "url": closed_url()}},
        "projects": {"/home/me/app": {"mcpServers": {"theirs": {"type": "http", "url": closed_url()}}}},
    }
    path.write_text(json.dumps(scopes, indent=2))
    install.run(Client.claude_code, None, dry_run=False, undo_it=False)


def test_doctor_without_config_checks_every_scope_s_servers_and_their_database_once(home: Path) -> None:
    install_user_and_project_scopes()
    result = CliRunner().invoke(app, ["doctor"])
    configs = [line for line in result.output.splitlines() if line.startswith("config: ")]
    assert result.exit_code == 1 and len(configs) == 2, result.output
    assert "FAIL server 'mine'" in result.output and "FAIL server 'theirs'" in result.output
    assert result.output.count("ok   database: ") == 1 and "2 problem(s) found" in result.output


def test_inspect_reads_the_database_the_scopes_share_and_serve_names_each_project(home: Path) -> None:
    install_user_and_project_scopes()
    assert CliRunner().invoke(app, ["doctor"]).exit_code == 1  # makes the database inspect reads
    status = CliRunner().invoke(app, ["inspect", "status"])
    assert status.exit_code == 0 and "namespace 'default'" in status.output, status.output
    serve = CliRunner().invoke(app, ["serve"])
    assert serve.exit_code == 2 and "(for project /home/me/app in " in serve.output, serve.output
