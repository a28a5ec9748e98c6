"""`toolwise dashboard` refuses what `serve --http` refuses, before it serves: a public bind without a
token, a busy port; each in one line with exit code 2. (It serving a browser: tests/e2e/test_dashboard_browser.py.)"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tests.cli.test_views import cli_config
from toolwise.cli.main import app as cli


def test_a_public_bind_without_a_token_is_refused(tmp_path: Path) -> None:
    _, config = cli_config(tmp_path)
    result = CliRunner().invoke(cli, ["dashboard", *config, "--host", "0.0.0.0"], env={"TOOLWISE_HTTP_TOKEN": None})
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "refusing to serve HTTP on '0.0.0.0' without a token" in said
    # the dashboard runs no tool (it said "could run every tool", as serve --http does): it shows what was recorded
    assert "anyone who can reach it could read what toolwise recorded (tools, calls, sessions)" in said, said


def test_a_busy_port_is_named(tmp_path: Path) -> None:
    _, config = cli_config(tmp_path)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["dashboard", *config, "--port", str(port)])
    assert result.exit_code == 2 and f"port {port} on 127.0.0.1 is already in use" in result.output


def test_a_port_past_65535_is_refused_not_wrapped_to_another(tmp_path: Path) -> None:
    _, config = cli_config(tmp_path)  # the socket would take 99999 as 99999 mod 65536: a port nobody asked for
    for command in (["serve", "--http"], ["dashboard"]):
        result = CliRunner().invoke(cli, [*command, *config, "--port", "99999"])
        said = " ".join(result.output.split())
        assert result.exit_code == 2 and "Invalid value for '--port'" in said and "65535" in said, said


def test_on_every_address_the_printed_address_is_one_the_dashboard_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--host 0.0.0.0` (or `::`) binds every address, but a browser sent to http://0.0.0.0:PORT/dashboard
    sends that Host, which the Host check refuses (421): the address printed is a loopback one."""
    from toolwise.server import dashboard_http

    async def serving(*args: Any) -> None:
        return None

    monkeypatch.setattr(dashboard_http, "serve_dashboard", serving)
    _, config = cli_config(tmp_path)
    (tmp_path / "toolwise.db").touch()  # a database with nothing in it (an empty file is one)
    for host, shown in (("0.0.0.0", "127.0.0.1"), ("::", "[::1]")):
        result = CliRunner().invoke(
            cli, ["dashboard", *config, "--host", host, "--port", "0"], env={"TOOLWISE_HTTP_TOKEN": "t" * 20}
        )
        assert result.exit_code == 0, result.output
        assert result.stdout.startswith(f"http://{shown}:") and result.stdout.rstrip().endswith("/dashboard")


def test_a_database_that_does_not_exist_is_refused_and_none_is_made(tmp_path: Path) -> None:
    """The dashboard only reads, as `inspect` does: on a mistyped path it served an empty page and left an
    empty database file behind, where `inspect status` says there is no database there."""
    missing = tmp_path / "never.db"
    result = CliRunner().invoke(cli, ["dashboard", "--database-url", f"sqlite+aiosqlite:///{missing}", "--port", "0"])
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "no database at" in said and "toolwise demo" in said, said
    assert not missing.exists()


@pytest.mark.parametrize("transport", ["http", "sse", "streamable-http"])
def test_serve_given_a_transport_option_says_which_option_it_has(transport: str) -> None:
    """Other MCP servers take `--transport`; click said 'No such option: --transport (Possible options: --port)'."""
    result = CliRunner().invoke(cli, ["serve", "--transport", transport])
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "serve has no --transport" in said and "--http" in said, result.output
    assert "--port" not in said and "Traceback" not in result.output
