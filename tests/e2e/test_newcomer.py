"""The newcomer's path, through the real `toolwise` command: the demo replays exactly under one seed
and fits 80 columns, a missing downstream is one line, doctor names what to fix, serve without a
config says how to get one, the inspect commands read the database they are given, and the stats'
mean reward is the one submit_feedback reports."""

from __future__ import annotations

import json
import os
import pty
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import BIN, time_server, toolwise

CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with a fresh HOME (never the real user's config or data)."""
    root = tmp_path / "home"
    return {
        **os.environ,
        "HOME": str(root),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "COLUMNS": "80",
    }


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "toolwise"), *args], capture_output=True, text=True, timeout=240, env=env)


def test_the_demo_prints_the_same_figures_and_table_twice_with_one_seed_within_80_columns(
    home: dict[str, str],
) -> None:
    first = cli(home, "demo", "--calls", "24", "--seed", "5")
    second = cli(home, "demo", "--calls", "24", "--seed", "5")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    whole = ("  toolwise ", "  /")  # a command and a path are printed whole, to be copied
    lines = [line for line in first.stdout.splitlines() if not line.startswith(whole)]
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert "toolwise serves 22 tools: 14 downstream (time 2, git 12) + 8 own" in first.stdout
    table = first.stdout[first.stdout.index("top recommendation") :]
    assert table.count("✓") + table.count("✗") == 10, "a right/wrong mark per request, before and after"
    assert "time__get_current_time" in table and "…" not in table, "no tool name is cut"
    assert any(line.startswith("right first time") for line in lines)
    assert "scripted follow-ups are not picks" in " ".join(first.stdout.split())


def test_the_demo_says_where_it_recorded_and_the_inspect_command_it_prints_reads_it(
    home: dict[str, str], tmp_path: Path
) -> None:
    """The command is run as printed, from a shell whose PATH lacks toolwise (the README runs
    .venv/bin/toolwise), for a user whose installed config learns in a namespace of its own."""
    installed = Path(home["XDG_CONFIG_HOME"]) / "toolwise" / "claude-desktop.json"
    installed.parent.mkdir(parents=True)
    installed.write_text(json.dumps({"mcpServers": {}, "toolwise": {"namespace": "work"}}))
    demo = cli(home, "demo", "--calls", "12", "--seed", "3")
    assert demo.returncode == 0, demo.stderr
    assert "after a wrong one it rated it 1 and called the right tool itself" in " ".join(demo.stdout.split())
    data = Path(home["XDG_DATA_HOME"]) / "toolwise"
    command = next(line.strip() for line in demo.stdout.splitlines() if " inspect status " in line)
    assert f"recorded in\n  {data / 'demo.db'}\n" in demo.stdout
    bare = {**home, "PATH": "/usr/bin:/bin"}
    status = subprocess.run(shlex.split(command), capture_output=True, text=True, timeout=240, env=bare)
    assert status.returncode == 0 and "12 executions" in " ".join(status.stdout.split()), status.stdout
    plot_it = [
        *shlex.split(command.replace(" inspect status ", " inspect plot ")),
        "--output",
        str(tmp_path / "demo.png"),
    ]
    plot = subprocess.run(plot_it, capture_output=True, text=True, timeout=240, env=bare)  # as the demo says
    assert plot.returncode == 0 and (tmp_path / "demo.png").stat().st_size > 0, plot.stdout + plot.stderr
    plain = cli(home, "inspect", "status")  # the database serve records into: nothing yet, and none is made
    assert plain.returncode == 1 and "no database at" in plain.stderr and "toolwise demo" in plain.stderr
    assert {p.name for p in data.iterdir() if p.suffix == ".db"} == {"demo.db"}, "no empty database left"


def test_the_demo_with_a_missing_downstream_says_what_to_install_in_one_line(
    home: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "demo.json"
    config.write_text(json.dumps({"mcpServers": {"time": time_server(), "gone": {"command": "mcp-server-absent"}}}))
    result = cli(home, "demo", "--config", str(config), "--calls", "5")
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "mcp-server-absent not installed" in result.stderr and "pip install mcp-server-absent" in result.stderr


def test_doctor_names_a_missing_command_and_what_to_fix(home: dict[str, str], tmp_path: Path) -> None:
    config = tmp_path / "toolwise.json"
    servers = {"time": time_server(), "gone": {"command": "mcp-server-absent"}}
    config.write_text(
        json.dumps({"mcpServers": servers, "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path}/t.db"}})
    )
    result = cli(home, "doctor", "--config", str(config))
    assert result.returncode == 1
    assert "FAIL server 'gone': command 'mcp-server-absent' not found on PATH" in result.stdout
    assert "fix: install it" in result.stdout
    assert "ok   server 'time':" in result.stdout and "2 tools" in result.stdout
    assert "ok   database:" in result.stdout and "1 problem(s) found" in result.stdout


def test_serve_without_a_config_says_to_run_install_and_then_serves_the_installed_one(
    home: dict[str, str], tmp_path: Path
) -> None:
    missing = subprocess.run(
        [str(BIN / "toolwise"), "serve"], capture_output=True, text=True, timeout=60, env=home, stdin=subprocess.DEVNULL
    )
    assert missing.returncode == 2 and "run `toolwise install`" in missing.stderr and "--config" in missing.stderr

    claude = Path(home["XDG_CONFIG_HOME"]) / "Claude" / "claude_desktop_config.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(json.dumps({"mcpServers": {"time": time_server()}}))
    assert cli(home, "install").returncode == 0
    installed = Path(home["XDG_CONFIG_HOME"]) / "toolwise" / "claude-desktop.json"
    doctor = cli(home, "doctor")
    assert doctor.returncode == 0 and f"config: {installed}" in doctor.stdout
    served = subprocess.run(
        [str(BIN / "toolwise"), "serve"], capture_output=True, text=True, timeout=60, env=home, stdin=subprocess.DEVNULL
    )
    first_log_line = served.stderr.splitlines()[0]
    assert f"serving the config {installed}" in first_log_line


def test_serve_typed_in_a_terminal_says_once_on_stderr_that_a_client_starts_it_and_how_to_stop_it(
    write_config: Callable[..., Path],
) -> None:
    """A newcomer who types `toolwise serve` saw it wait in silence; stdout stays the protocol."""
    config = write_config({})
    terminal, tty = pty.openpty()
    served = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--config", str(config)],
        stdin=tty,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(tty)
    assert served.stdout is not None and served.stderr is not None
    lines: list[str] = []
    reader = threading.Thread(target=lines.extend, args=(served.stderr,), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not any("tools on stdio" in line for line in lines) and time.monotonic() < deadline:
        time.sleep(0.1)
    served.send_signal(signal.SIGINT)
    stdout = served.stdout.read()
    served.wait(timeout=60)
    reader.join(timeout=10)
    os.close(terminal)
    said = "".join(lines)
    assert stdout == "", stdout
    assert said.count("MCP over stdin/stdout") == 1, said
    assert "toolwise install" in said and "Ctrl-C" in said, said


async def test_stats_mean_reward_is_per_call_as_submit_feedback_reports_it(
    write_config: Callable[..., Path],
) -> None:
    async with toolwise(write_config({"time": time_server()})) as client:
        await client.call_tool("time__convert_time", CONVERT)
        rated = await client.call_tool("submit_feedback", {"rating": 1, "tool": "time__convert_time"})
        stats = (await client.call_tool("get_learning_stats", {})).structured_content
    assert stats["mean_reward"] == pytest.approx(rated.structured_content["reward"])
    assert stats["updates"] == 2 and stats["mean_update_reward"] != pytest.approx(stats["mean_reward"])


def test_inspect_reads_the_database_it_is_given_and_warns_about_an_unknown_namespace(
    home: dict[str, str], tmp_path: Path
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}"
    assert cli(home, "demo", "--calls", "6", "--database-url", url).returncode == 0
    status = cli(home, "inspect", "status", "--database-url", url)
    assert status.returncode == 0 and "6 executions" in status.stdout and "kept.db" in status.stdout
    env = {**home, "TOOLWISE_DATABASE_URL": url}
    assert "6 executions" in cli(env, "inspect", "progress").stdout
    compare = cli(home, "inspect", "compare", "default", "nowhere", "--database-url", url)
    assert "no executions in namespace 'nowhere'" in compare.stdout and "'default'" in compare.stdout
