"""Every start-up failure a user can cause, through the real `toolwise` command in a throwaway HOME:
one line on stderr naming what is wrong and what to do, a documented exit code (2: toolwise could not
start; 1: a command ran and found something), and the traceback only under `toolwise --debug`."""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import BIN, time_server

READ_FAILED = (
    "OperationalError: unable to open database file; toolwise cannot open it: check that it is a file (not a folder) "
    "that toolwise may read and write"
)


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with a fresh HOME (never the real user's config or data)."""
    root = tmp_path / "home"
    root.mkdir()
    return {
        **os.environ,
        "HOME": str(root),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "COLUMNS": "80",
    }


def cli(env: dict[str, str], *args: str, unprivileged: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "toolwise"), *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        stdin=subprocess.DEVNULL,
        preexec_fn=_without_file_override if unprivileged else None,
    )


def _without_file_override() -> None:
    """As root, drop the capabilities that ignore file permissions (what a user's process lacks)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        libc.prctl(24, capability, 0, 0, 0)  # PR_CAPBSET_DROP


def config(tmp_path: Path, servers: dict[str, Any], name: str = "toolwise.json", **settings: Any) -> Path:
    path = tmp_path / name
    toolwise = {"database_url": f"sqlite+aiosqlite:///{tmp_path / 't.db'}", **settings}
    path.write_text(json.dumps({"mcpServers": servers, "toolwise": toolwise}))
    return path


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    """stderr, which must be exactly one line."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_a_read_only_data_folder_is_one_line_and_exit_2(home: dict[str, str]) -> None:
    local = Path(home["HOME"]) / ".local"
    local.mkdir()
    local.chmod(0o555)
    result = cli(home, "demo", "--calls", "1", unprivileged=True)  # inspect makes no database: it refuses first
    share = Path(home["XDG_DATA_HOME"])
    assert (result.returncode, one_line(result)) == (
        2,
        f"toolwise: unusable database: cannot create {share / 'toolwise' / 'demo.db'}: Permission denied "
        f"({share}); make that folder writable, or use another database with --database-url (or "
        "TOOLWISE_DATABASE_URL)",
    )


def test_a_busy_port_is_one_line_naming_it_before_anything_is_served(home: dict[str, str], tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = cli(home, "serve", "--http", "--port", str(port), "-c", str(config(tmp_path, {"time": time_server()})))
    assert (result.returncode, one_line(result)) == (
        2,
        f"toolwise: port {port} on 127.0.0.1 is already in use (another toolwise or server is listening there): "
        "stop it, or pass --port with a free port",
    )


def test_a_misspelt_config_key_gets_did_you_mean_and_debug_adds_the_traceback(
    home: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "typo.json"
    path.write_text(json.dumps({"mcpServer": {"time": time_server()}}))
    expected = f"toolwise: invalid config: {path}: unknown key 'mcpServer'; did you mean 'mcpServers'?"
    result = cli(home, "serve", "-c", str(path))
    assert (result.returncode, one_line(result)) == (2, expected)
    debug = cli(home, "--debug", "serve", "-c", str(path))
    assert debug.returncode == 2 and "Traceback" in debug.stderr and debug.stderr.splitlines()[-1] == expected
    path.write_text(json.dumps({"mcpServers": {"time": time_server()}, "toolwise": {"databse_url": "x"}}))
    result = cli(home, "doctor", "-c", str(path))
    assert (result.returncode, one_line(result)) == (
        2,
        f"toolwise: invalid config: {path}: databse_url: Extra inputs are not permitted; did you mean 'database_url'?",
    )


def test_doctor_offers_the_near_miss_of_a_misspelt_command_never_a_package_by_that_name(
    home: dict[str, str], tmp_path: Path
) -> None:
    path = config(tmp_path, {"time": {"command": "mcp-server-tiem"}})
    result = cli(home, "doctor", "-c", str(path))
    assert result.returncode == 1
    assert "FAIL server 'time': command 'mcp-server-tiem' not found on PATH" in result.stdout
    assert f"""     fix: did you mean 'mcp-server-time'? Correct "command" of 'time' in {path}""" in result.stdout
    assert "pip install" not in result.stdout


def test_the_demo_on_an_unusable_database_is_one_line(home: dict[str, str], tmp_path: Path) -> None:
    folder = tmp_path / "a-folder"
    folder.mkdir()
    result = cli(home, "demo", "--calls", "3", "--database-url", f"sqlite+aiosqlite:///{folder}")
    assert (result.returncode, one_line(result)) == (2, f"toolwise: unusable database: {folder}: {READ_FAILED}")


BOOTING = """import os, signal, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # slow to stop, as npx is while it fetches a package
time.sleep(60)  # a server still booting: its stdin unread
"""


@pytest.mark.parametrize("transport", [["--http", "--port", "0"], []], ids=["http", "stdio"])
def test_serve_on_an_unusable_database_says_so_and_stops_its_servers_without_blaming_them(
    home: dict[str, str], tmp_path: Path, transport: list[str]
) -> None:
    """The database fails while the servers boot: the one line says what failed, and the servers, given up
    while still starting, are stopped without a warning that they "did not stop" (nothing was wrong with them)."""
    folder, script, pid = tmp_path / "a-folder", tmp_path / "booting.py", tmp_path / "booting.pid"
    folder.mkdir()
    script.write_text(BOOTING)
    path = config(tmp_path, {"slow": {"command": sys.executable, "args": [str(script), str(pid)]}})
    result = cli(home, "serve", *transport, "-c", str(path), "--database-url", f"sqlite+aiosqlite:///{folder}")
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == f"toolwise: unusable database: {folder}: {READ_FAILED}"
    assert "did not stop" not in result.stderr and "WARNING" not in result.stderr, result.stderr
    with pytest.raises(ProcessLookupError):  # the server is gone with it
        os.kill(int(pid.read_text()), 0)


def install_two_clients_and_undo_one(home: dict[str, str]) -> tuple[Path, Path]:
    root = Path(home["HOME"])
    desktop = root / ".config" / "Claude" / "claude_desktop_config.json"
    cursor = root / ".cursor" / "mcp.json"
    for path in (desktop, cursor):
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"mcpServers": {"time": time_server()}}))
    assert cli(home, "install").returncode == 0
    assert cli(home, "install", "--client", "cursor").returncode == 0
    return desktop, cursor


def test_a_config_left_by_undo_is_not_installed_and_several_name_the_command_to_run(
    home: dict[str, str], tmp_path: Path
) -> None:
    install_two_clients_and_undo_one(home)
    folder = Path(home["XDG_CONFIG_HOME"]) / "toolwise"
    result = cli(home, "serve")  # which servers to serve: one config's (inspect reads the database they share)
    assert (result.returncode, one_line(result)) == (
        2,
        "toolwise: several toolwise configs are installed: claude-desktop.json (for "
        f"{Path(home['XDG_CONFIG_HOME']) / 'Claude' / 'claude_desktop_config.json'}), cursor.json (for "
        f"{Path(home['HOME']) / '.cursor' / 'mcp.json'}); name one, e.g. "
        f"`toolwise serve --config {folder / 'claude-desktop.json'}`",
    )
    url = f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}"
    (tmp_path / "kept.db").touch()  # an (empty) database: inspect makes none
    status = cli(home, "inspect", "status", "--database-url", url)
    assert status.returncode == 0 and "kept.db" in status.stdout, status.stderr

    assert cli(home, "install", "--client", "cursor", "--undo").returncode == 0
    doctor = cli(home, "doctor")  # cursor.json is still there, but only claude-desktop.json is served
    assert doctor.returncode == 0 and f"config: {folder / 'claude-desktop.json'}" in doctor.stdout, doctor.stderr


NEEDS = """
import os, sys
for name in {names!r}:
    if not os.environ.get(name):
        sys.exit(f"npm ERR! code UNABLE_TO_GET_ISSUER_CERT_LOCALLY ({{name}} is not set)")
os.execv(sys.argv[1], sys.argv[1:])
"""


def needing(tmp_path: Path, *variables: str) -> dict[str, Any]:
    """A server that starts only when `variables` are set (as npx needs the CA bundle behind a proxy)."""
    script = tmp_path / f"needs_{'_'.join(variables)}.py"
    script.write_text(NEEDS.format(names=variables))
    return {"command": sys.executable, "args": [str(script), str(BIN / "mcp-server-time")]}


def test_doctor_passes_the_network_variables_and_names_one_a_server_lacks(home: dict[str, str], tmp_path: Path) -> None:
    servers = {
        "npx-like": needing(tmp_path, "SSL_CERT_FILE"),
        "corp": needing(tmp_path, "CORP_CA_BUNDLE"),
        "two": needing(tmp_path, "CORP_TOKEN", "CORP_REGION"),
    }
    path = config(tmp_path, servers)
    env = {
        **home,
        "SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt",
        "CORP_CA_BUNDLE": "/etc/ssl/corp.pem",
        "CORP_TOKEN": "t",
        "CORP_REGION": "eu",
    }
    result = cli(env, "doctor", "-c", str(path))
    assert result.returncode == 1
    assert "ok   server 'npx-like': mcp-time" in result.stdout, result.stdout
    assert (
        "FAIL server 'corp': failed to start: command exited with status 1; it said: npm ERR! code "
        "UNABLE_TO_GET_ISSUER_CERT_LOCALLY (CORP_CA_BUNDLE is not set)"
    ) in result.stdout
    assert (
        "     fix: it needs CORP_CA_BUNDLE from your shell, which toolwise does not pass to servers: add "
        f""""CORP_CA_BUNDLE": "…" to the "env" of 'corp' in {path}"""
    ) in result.stdout
    assert "     fix: it needs CORP_REGION, CORP_TOKEN from your shell" in result.stdout


def test_doctor_names_a_command_a_server_runs_that_is_missing(home: dict[str, str], tmp_path: Path) -> None:
    path = config(tmp_path, {"launcher": {"command": "/bin/sh", "args": ["-c", "exec node-absent server.js"]}})
    result = cli(home, "doctor", "-c", str(path))
    assert result.returncode == 1
    assert (
        "     fix: it runs 'node-absent', which is not on the PATH toolwise gives it: install it, or add its "
        f"""folder to "PATH" in the "env" of 'launcher' in {path}"""
    ) in result.stdout


def test_doctor_on_an_http_server_speaks_of_its_url_not_its_command(home: dict[str, str], tmp_path: Path) -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{unused.getsockname()[1]}/mcp"
    path = config(tmp_path, {"remote": {"url": url}}, start_timeout_s=5)
    result = cli(home, "doctor", "-c", str(path))
    assert result.returncode == 1
    assert (
        f"FAIL server 'remote': cannot connect to {url}: ConnectError: All connection attempts failed" in result.stdout
    )
    assert (
        f"""     fix: check that the server at {url} is running, and its "url" and "headers" in {path}"""
    ) in result.stdout
    assert "command" not in result.stdout


def test_a_config_that_cannot_be_read_is_one_line(home: dict[str, str], tmp_path: Path) -> None:
    result = cli(home, "serve", "-c", str(tmp_path))
    assert (result.returncode, one_line(result)) == (
        2,
        f"toolwise: invalid config: {tmp_path}: cannot read it (Is a directory)",
    )
    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "mcp-server-time"}}}')
    result = cli(home, "doctor", "-c", str(latin))
    assert (result.returncode, one_line(result)) == (
        2,
        f"toolwise: invalid config: {latin}: not UTF-8 text (byte 20); save it as UTF-8",
    )


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permissions")
def test_install_into_a_folder_it_cannot_write_is_one_line(home: dict[str, str]) -> None:
    client = Path(home["HOME"]) / ".cursor" / "mcp.json"
    client.parent.mkdir()
    client.write_text(json.dumps({"mcpServers": {"time": time_server()}}))
    client.parent.chmod(0o555)  # the backup beside it cannot be made
    result = cli(home, "install", "--client", "cursor", unprivileged=True)
    assert (result.returncode, one_line(result)) == (
        1,
        f"toolwise: cannot write in {client.parent}: Permission denied; make that folder writable and run again",
    )


def test_a_broken_record_of_installs_is_one_line(home: dict[str, str]) -> None:
    record = Path(home["XDG_CONFIG_HOME"]) / "toolwise" / "installs.json"
    record.parent.mkdir(parents=True)
    record.write_text("{broken")
    result = cli(home, "serve")
    assert (result.returncode, one_line(result)) == (
        2,
        f"toolwise: {record}: not valid JSON at line 1 (Expecting property name enclosed in double quotes); "
        "fix or delete it, or pass --config FILE",
    )


def test_the_demo_offers_the_near_miss_of_a_misspelt_command_never_a_package_by_that_name(
    home: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "demo.json"
    path.write_text(json.dumps({"mcpServers": {"time": {"command": "mcp-server-tiem"}}}))
    result = cli(home, "demo", "--config", str(path), "--calls", "3")
    assert (result.returncode, one_line(result)) == (
        1,
        "toolwise: demo: commands not found on PATH: 'mcp-server-tiem' (did you mean 'mcp-server-time'?); "
        f'correct "command" in {path}',
    )
