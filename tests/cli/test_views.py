"""The log's views from the command line, on a real SQLite file: the plot is drawn from time slices the
database aggregates, the export writes the episodes and per-tool summaries of its window."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.feedback.conftest import make_execution
from toolwise.cli.main import app as cli
from toolwise.feedback import Episode, FeedbackService, utcnow

HOURS = 10


def fill(url: str, now: datetime) -> None:
    """40 executions of two tools spread evenly over HOURS, the first half failing and unrewarded; one
    episode ending each hour."""

    async def work() -> None:
        async with FeedbackService(url) as feedback:
            for i in range(40):
                execution = make_execution(f"s__t{i % 2}", success=i >= 20, reward=10.0 if i >= 20 else None)
                execution.finished_at = now - timedelta(hours=HOURS) + timedelta(hours=HOURS * i / 39)
                await feedback.log.record_execution(execution)
            for h in range(HOURS):
                ended = now - timedelta(hours=h, minutes=30)
                episode = Episode(f"s{h}", ["s__t0"], 1.0, "success", ended - timedelta(minutes=1), ended)
                await feedback.log.record_episode(episode)

    asyncio.run(work())


def cli_config(tmp_path: Path) -> tuple[str, list[str]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    config = tmp_path / "toolwise.json"
    config.write_text(json.dumps({"mcpServers": {}, "toolwise": {"database_url": url}}))
    return url, ["--config", str(config)]


def test_plot_draws_the_curves_from_slices_of_time(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    url, config = cli_config(tmp_path)
    fill(url, utcnow())
    plot = tmp_path / "curves.png"
    result = CliRunner().invoke(cli, ["inspect", "plot", *config, "--output", str(plot), "--buckets", "5"])
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "40 calls in 5 slices of 2 h" in " ".join(result.output.split())  # the console wraps at its width
    (tmp_path / "toolwise.db-empty").touch()  # a database with nothing in it (an empty file is one)
    nothing = CliRunner().invoke(cli, ["inspect", "plot", *config, "-o", str(plot), "--database-url", f"{url}-empty"])
    assert nothing.exit_code == 1 and "no executions in namespace 'default' to plot" in nothing.output


def test_a_command_that_reads_refuses_a_database_that_does_not_exist_and_makes_none(tmp_path: Path) -> None:
    missing = tmp_path / "never.db"
    for command in (["inspect", "status"], ["inspect", "progress"], ["snapshot", "list"]):
        result = CliRunner().invoke(cli, [*command, "--database-url", f"sqlite+aiosqlite:///{missing}"])
        said = " ".join(result.output.split())  # the console wraps at its width, after the path of tmp_path
        assert result.exit_code == 1 and "no database at" in said and "toolwise demo" in said
    assert not missing.exists()


def test_a_command_that_reads_the_database_needs_no_secret_a_server_of_the_config_references(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README says to write a secret as `${VAR}`, set where toolwise serves (the client entry's env): in a
    shell without it, `inspect`, `snapshot` and the dashboard refused the whole config ("environment variable
    'GITHUB_TOKEN' is not set"), though they read only the database the config names."""
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    url, config = cli_config(tmp_path)
    fill(url, utcnow())
    servers = {"gh": {"command": "gh-server", "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}"}}}
    Path(config[1]).write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": url}}))
    for command in (["inspect", "status"], ["inspect", "top-actions"], ["snapshot", "list"]):
        result = CliRunner().invoke(cli, [*command, *config])
        assert result.exit_code == 0, result.output
    serve = CliRunner().invoke(cli, ["serve", *config])  # the servers' start still needs it
    assert serve.exit_code == 2 and "'GITHUB_TOKEN' is not set" in serve.output, serve.output


def test_export_writes_the_episodes_and_summaries_of_its_window(tmp_path: Path) -> None:
    url, config = cli_config(tmp_path)
    now = utcnow().replace(microsecond=0)
    fill(url, now)
    out = tmp_path / "export.jsonl"
    since, until = (now - timedelta(hours=4)).isoformat(), (now - timedelta(hours=1)).isoformat()
    result = CliRunner().invoke(cli, ["inspect", "export", *config, "-o", str(out), "--since", since, "--until", until])
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    episodes = [line["session_id"] for line in lines if line["type"] == "episode"]
    assert episodes == ["s1", "s2", "s3"]  # ended 1.5, 2.5 and 3.5 hours ago: newest first
    executions = [line for line in lines if line["type"] == "execution"]
    finished = [datetime.fromisoformat(e["finished_at"]) for e in executions]
    assert len(executions) == 12 and all(now - timedelta(hours=4) <= f < now - timedelta(hours=1) for f in finished)
    actions = {line["tool"]: line for line in lines if line["type"] == "action"}  # the whole namespace
    assert actions["s__t0"]["calls"] == 20 and actions["s__t0"]["success_rate"] == 0.5
    assert actions["s__t1"]["mean_reward"] == 10.0 and actions["s__t1"]["explored"] == 0


def test_an_export_is_readable_by_its_owner_alone(tmp_path: Path) -> None:
    url, config = cli_config(tmp_path)
    fill(url, utcnow())
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    old.write_text("an older export\n")
    old.chmod(0o644)
    for out in (new, old):
        result = CliRunner().invoke(cli, ["inspect", "export", *config, "-o", str(out)])
        assert result.exit_code == 0, result.output
        assert out.stat().st_mode & 0o777 == 0o600, oct(out.stat().st_mode)
    assert [json.loads(line)["type"] for line in old.read_text().splitlines()].count("execution") == 40


def test_progress_labels_a_slice_longer_than_a_day_with_both_its_dates(tmp_path: Path) -> None:
    """A month in 12 slices: each row says from which day to which, where '2026-10-28 15:22:46–15:22:46'
    read as a slice of no time at all."""
    url, config = cli_config(tmp_path)
    now = utcnow().replace(microsecond=0)

    async def work() -> None:
        async with FeedbackService(url) as feedback:
            for days in (30, 0):
                execution = make_execution("s__t0")
                execution.finished_at = now - timedelta(days=days)
                await feedback.log.record_execution(execution)

    asyncio.run(work())
    result = CliRunner().invoke(cli, ["inspect", "progress", *config, "--hours", "800", "--buckets", "12"])
    assert result.exit_code == 0, result.output
    first, last = now - timedelta(days=30), now
    slice_end = first + timedelta(days=2.5)
    assert f"{first:%Y-%m-%d %H:%M}–{slice_end:%Y-%m-%d %H:%M}" in result.output, result.output
    assert f"–{last:%Y-%m-%d %H:%M}" in result.output, result.output
