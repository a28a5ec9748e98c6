"""`toolwise doctor` names what failed without printing a secret of the config in full."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from typer.testing import CliRunner

from toolwise.cli.main import app


def test_doctor_masks_a_password_in_a_failing_servers_url(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nothing listens on: the check fails at once
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = tmp_path / "toolwise.json"
    server = {"url": f"http://me:hunter2-secret@127.0.0.1:{port}/mcp", "headers": {"Authorization": "Bearer tok"}}
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config.write_text(json.dumps({"mcpServers": {"api": server}, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and "FAIL server 'api'" in result.output, result.output
    assert "hunter2-secret" not in result.output and "me:***@127.0.0.1" in result.output
