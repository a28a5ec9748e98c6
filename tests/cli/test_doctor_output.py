"""`toolwise doctor` names what failed without printing a secret of the config in full."""

from __future__ import annotations

import asyncio
import json
import shlex
import socket
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.feedback.test_integrity import damage_a_page, write_log
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


def test_doctor_runs_the_full_integrity_check_and_names_a_damaged_page(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    asyncio.run(write_log(db))
    config = tmp_path / "toolwise.json"
    config.write_text(json.dumps({"mcpServers": {}, "toolwise": {"database_url": f"sqlite+aiosqlite:///{db}"}}))
    sound = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert sound.exit_code == 0 and "300 executions in namespace 'default', integrity_check ok" in sound.output
    page = damage_a_page(db)
    damaged = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert damaged.exit_code == 1, damaged.output
    assert f"FAIL database: {db} is damaged: " in damaged.output and f"page {page}" in damaged.output
    assert ".recover" in damaged.output  # and what to do about it


def test_doctor_masks_a_secret_argument_of_the_command_it_says_to_run_by_hand(tmp_path: Path) -> None:
    secret, joined = "argsecret" + "Q" * 12, "hunter2" * 3
    args = ["-c", "raise SystemExit(3)", "--api-key", secret, "--verbose", f"--password={joined}"]
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config = tmp_path / "toolwise.json"
    server = {"command": sys.executable, "args": args}
    config.write_text(json.dumps({"mcpServers": {"dies": server}, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and "FAIL server 'dies'" in result.output, result.output
    assert secret not in result.output and joined not in result.output
    assert "--api-key '***' --verbose '--password=***'` by hand" in result.output  # the command's quote kept


@pytest.mark.parametrize("reference", ["${DOCTOR_KEY}", "${env:DOCTOR_KEY}"])
def test_doctor_shows_a_reference_not_the_secret_it_resolves_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str
) -> None:
    """A `${VAR}` in a server's url path or in a positional argument is resolved when the config loads;
    what doctor prints (the url it cannot reach, the command to run by hand) shows the reference as the
    config writes it (Cursor's `${env:VAR}` was shown as `${VAR}`)."""
    secret = "resolved" + "Z" * 16
    monkeypatch.setenv("DOCTOR_KEY", secret)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    servers = {
        "api": {"url": f"http://127.0.0.1:{port}/{reference}/mcp"},
        "dies": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)", reference]},
    }
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config = tmp_path / "toolwise.json"
    config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and "FAIL server 'api'" in result.output and "FAIL server 'dies'" in result.output
    assert secret not in result.output, result.output
    assert f"127.0.0.1:{port}/{reference}/mcp" in result.output and f"SystemExit(3)' {reference}`" in result.output


@pytest.mark.parametrize(("command", "provider"), [("uvx", "uv (https://docs.astral.sh/uv/)"), ("npx", "Node.js")])
def test_doctor_says_what_provides_a_missing_launcher_rather_than_a_servers_readme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str, provider: str
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a machine without it
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    server = {"command": command, "args": ["some-mcp-server"]}
    config.write_text(json.dumps({"mcpServers": {"fetch": server}, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and f"FAIL server 'fetch': command '{command}' not found on PATH" in result.output
    assert f"fix: '{command}' comes with {provider}" in result.output and "README" not in result.output


def test_doctor_names_a_disabled_server_and_does_not_say_everything_starts_when_nothing_does(tmp_path: Path) -> None:
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    server = {"command": "mcp-server-time", "disabled": True}
    config.write_text(json.dumps({"mcpServers": {"time": server}, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert (
        result.exit_code == 0 and f"""off  server 'time': "disabled": true in {config}, not started""" in result.output
    )
    assert result.output.splitlines()[-1] == "no server to start: toolwise would serve its own tools alone"


def test_the_command_doctor_says_to_run_by_hand_runs_as_printed(tmp_path: Path) -> None:
    """A server started as `python3 -c "<code>"` was printed `python3 -c import sys; …`: pasted into a
    shell, that ran something else."""
    args = ["-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"]
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    server = {"command": sys.executable, "args": args}
    config.write_text(json.dumps({"mcpServers": {"dies": server}, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and "it said: boom" in result.output, result.output
    printed = " ".join(result.output.split()).split("run `", 1)[1].split("` by hand", 1)[0]
    assert shlex.split(printed) == [sys.executable, *args]


def test_doctor_masks_a_literal_secret_of_the_config_that_a_failing_server_prints(tmp_path: Path) -> None:
    """A server that dies saying the key it was given ("invalid API key: …"): doctor quoted its last line,
    the key from the config's "env" (or a header) in full, in a shape the masking did not know."""
    key, header = "plain" + "K" * 20, "opaque" + "H" * 20
    code = "import os, sys; print('invalid API key:', os.environ['WEATHER_API_KEY'], file=sys.stderr); sys.exit(3)"
    servers = {
        "dies": {"command": sys.executable, "args": ["-c", code], "env": {"WEATHER_API_KEY": key}},
        "api": {"url": f"http://127.0.0.1:9/{header}/mcp", "headers": {"X-Api-Key": header}},
    }
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and "it said: invalid API key: ***" in result.output, result.output
    assert key not in result.output and header not in result.output, result.output


def test_doctor_masks_a_secret_argument_that_a_failing_server_repeats(tmp_path: Path) -> None:
    """A server that dies repeating its command line (argparse's "unrecognized arguments: --api-key …"):
    doctor masked the key in the command it says to run by hand, but quoted the server's last line whole."""
    key, joined = "plain" + "A" * 20, "plain" + "J" * 20
    code = "import sys; print('unrecognized arguments:', *sys.argv[1:], file=sys.stderr); sys.exit(2)"
    args = ["-c", code, "--api-key", key, f"--token={joined}"]
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config.write_text(
        json.dumps(
            {"mcpServers": {"dies": {"command": sys.executable, "args": args}}, "toolwise": {"database_url": database}}
        )
    )
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1 and "it said: unrecognized arguments: --api-key *** --token=***" in result.output, (
        result.output
    )
    assert key not in result.output and joined not in result.output, result.output


def test_doctor_says_a_command_line_written_as_the_command_belongs_in_command_and_args(tmp_path: Path) -> None:
    """ "command": "npx -y @modelcontextprotocol/server-memory", as a README's one-liner is pasted: no such
    command exists, and doctor said to install a package named after the whole line."""
    line = f"{sys.executable} -m mcp_server_time --api-key {'plain' + 'K' * 20}"
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config.write_text(json.dumps({"mcpServers": {"time": {"command": line}}, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1, result.output
    fix = (
        f'fix: "command" of \'time\' holds a whole command line: give "command": {json.dumps(sys.executable)} '
        f'and "args": ["-m", "mcp_server_time", "--api-key", "***"] in {config}'
    )
    assert fix in result.output and "K" * 20 not in result.output, result.output


def test_doctor_names_an_include_or_exclude_list_that_matches_none_of_the_servers_tools(tmp_path: Path) -> None:
    """A misspelt name in `includeTools` offers none of the server's tools: doctor said `ok … 2 tools` and
    "everything starts" while the client got nothing of that server."""
    config = tmp_path / "toolwise.json"
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    servers = {
        "time": {"command": "mcp-server-time", "includeTools": ["get_curent_time"]},
        "clock": {"command": "mcp-server-time", "excludeTools": ["convert_time"]},
    }
    config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert "FAIL server 'time': " in result.output and "2 tools, 0 offered" in result.output, result.output
    assert "includeTools names no tool it lists: get_curent_time" in result.output
    assert "did you mean 'get_current_time' for 'get_curent_time'? Correct includeTools of 'time'" in result.output
    assert "ok   server 'clock': " in result.output and "2 tools, 1 offered" in result.output


def test_doctor_names_a_pinned_tool_that_matches_no_tool_toolwise_serves(tmp_path: Path) -> None:
    """`pinned_tools: ["time__get_curent_time"]` (a typo) pins nothing: with `exposure: search` the tool is
    not listed and nothing said so, serve nor doctor ("everything starts")."""
    config = tmp_path / "toolwise.json"
    settings = {
        "database_url": f"sqlite+aiosqlite:///{tmp_path / 't.db'}",
        "exposure": "search",
        "pinned_tools": ["time__get_curent_time", "time__convert_*", "submit_feedback"],
    }
    config.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-time"}}, "toolwise": settings}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    said = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert "FAIL pinned_tools: time__get_curent_time matches no tool toolwise serves" in said, said
    assert (
        f"did you mean 'time__get_current_time' for 'time__get_curent_time'? Correct pinned_tools in {config}" in said
    )


def test_doctor_says_a_server_that_answers_401_wants_a_token_not_that_it_cannot_be_reached(tmp_path: Path) -> None:
    """A remote server the client signed in to by OAuth (Claude Code keeps that token itself), moved behind
    toolwise without one: doctor said "cannot connect … check that the server … is running" of a server that
    was running and answered 401."""
    import http.server
    import threading

    class Refuses(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Bearer realm="mcp"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: object) -> None:  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp"
        config = tmp_path / "toolwise.json"
        database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
        config.write_text(json.dumps({"mcpServers": {"notion": {"url": url}}, "toolwise": {"database_url": database}}))
        result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
        servers = {"notion": {"url": url, "headers": {"Authorization": "Bearer stale-token-0123456789"}}}
        config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database}}))
        stale = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    finally:
        server.shutdown()
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and f"FAIL server 'notion': {url} answered 401 Unauthorized" in said, said
    assert "cannot connect" not in said and 'an "Authorization" header in its "headers"' in said
    assert "answered 401 Unauthorized: it refused the token in its headers" in " ".join(stale.output.split())


def test_doctor_fails_only_the_server_whose_variable_is_unset_and_checks_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `${VAR}` this shell lacks is that one server's problem: doctor said so in one line and checked
    nothing else (exit 2), where serve starts every server whose variables are set... or refuses, so the user
    wants to know what else is wrong before fixing it."""
    monkeypatch.delenv("TOOLWISE_TEST_NEVER_SET", raising=False)
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    servers = {
        "keyed": {"command": sys.executable, "args": ["-c", "pass"], "env": {"KEY": "${TOOLWISE_TEST_NEVER_SET}"}},
        "dies": {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]},
        "remote": {"url": "${TOOLWISE_TEST_NEVER_SET}"},  # a url given whole by one: not "should match pattern"
    }
    config = tmp_path / "toolwise.json"
    config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1, result.output
    lines = result.output.splitlines()
    for name in ("keyed", "remote"):
        failed = next(line for line in lines if line.startswith(f"FAIL server {name!r}"))
        assert "environment variable 'TOOLWISE_TEST_NEVER_SET' is not set" in failed, result.output
    assert any(line.startswith("FAIL server 'dies'") for line in lines), result.output  # the other still checked
    assert "3 problem(s) found" in result.output


def test_doctor_says_a_folder_given_as_the_command_is_a_folder(tmp_path: Path) -> None:
    """An absolute path to a folder (the server's checkout, not its program) was 'not found on PATH… give its
    absolute path', which it already is."""
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    config = tmp_path / "toolwise.json"
    config.write_text(
        json.dumps({"mcpServers": {"dir": {"command": str(tmp_path)}}, "toolwise": {"database_url": database}})
    )
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert f"FAIL server 'dir': command {str(tmp_path)!r} is a folder, not a program" in result.output, result.output
    assert "absolute path" not in result.output


def test_doctor_says_how_a_server_that_exits_at_once_exited(tmp_path: Path) -> None:
    """As serve's log does ('command exited with status 3'), not the SDK's 'MCPError: Connection closed'."""
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    script = "import sys; print('bad flag --x', file=sys.stderr); raise SystemExit(3)"
    config = tmp_path / "toolwise.json"
    servers = {"dies": {"command": sys.executable, "args": ["-c", script]}}
    config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database}}))
    result = CliRunner().invoke(app, ["doctor", "--config", str(config)])
    assert result.exit_code == 1, result.output
    assert "FAIL server 'dies': failed to start: command exited with status 3; it said: bad flag --x" in result.output
