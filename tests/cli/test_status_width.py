"""`inspect status` at 80 columns, a terminal's default: every header whole (rich cut "downstreams" to
"downstrea…"), a long cell wrapped onto more lines rather than cut (a host name to "laptop.lo…")."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from typer.testing import CliRunner

from tests.cli.test_views import cli_config
from toolwise.cli.main import app as cli
from toolwise.cli.reports import STOPPED_SHOWN
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.records import InstanceStatus

HEADERS = ("instance", "host/pid", "state", "serving", "servers", "circuits", "calls")


def heartbeat(url: str) -> None:
    """One running instance over the README's example servers, as its heartbeat reports it."""

    async def work() -> None:
        now = utcnow()
        downstreams = [{"server": s, "state": "ready", "circuit": "closed"} for s in ("time", "git", "fetch")]
        status = {"serving": "serving", "downstreams": downstreams, "open_circuits": [], "calls": 1234}
        async with FeedbackService(url) as feedback:
            instance = InstanceStatus(
                "3f9a0c1d2e4b", "default", "laptop.local", 48213, now - timedelta(hours=1), now, status
            )
            await feedback.instances.heartbeat(instance)

    asyncio.run(work())


def test_inspect_status_at_80_columns_shows_every_header_and_cell_whole(tmp_path: Path) -> None:
    url, config = cli_config(tmp_path)
    heartbeat(url)
    result = CliRunner().invoke(cli, ["inspect", "status", *config], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    table = [line for line in lines if line[:1] in "┏┃┡│└"]  # a message is one line, the terminal wraps it
    assert max(len(line) for line in table) <= 80 and "…" not in result.output, result.output
    header = next(line for line in lines if line.startswith("┃"))
    assert [cell.strip() for cell in header.strip("│┃").split("┃")] == list(HEADERS), result.output
    rows = [line.strip("│").split("│") for line in lines if line.startswith("│")]
    columns = ["".join("".join(row[i].split()) for row in rows) for i in range(len(HEADERS))]  # wrapped cells rejoined
    state = columns[2]  # "alive (Ns ago)": the seconds since its heartbeat
    assert state.startswith("alive(") and state.endswith("sago)"), result.output
    whole = [
        "3f9a0c1d",
        "laptop.local/48213",
        state,
        "serving",
        "time:readygit:readyfetch:ready",
        "allclosed",
        "1234",
    ]
    assert columns == whole, result.output


def test_inspect_status_shows_the_running_instances_not_every_instance_that_ever_ran(tmp_path: Path) -> None:
    """Every start of toolwise leaves its row (a stdio client starts one per session: hundreds a month); the
    table showed them all, the running ones lost among the stopped. It shows every running instance and the
    newest stopped (or stale) ones, and says how many older ones it leaves out."""
    url, config = cli_config(tmp_path)
    heartbeat(url)  # the one running

    async def stopped() -> None:
        now = utcnow()
        async with FeedbackService(url) as feedback:
            for n in range(40):
                ended = now - timedelta(hours=2, minutes=n)
                began = ended - timedelta(minutes=5)
                instance = InstanceStatus(f"dead{n:04d}beef", "default", "laptop", 1000 + n, began, ended, {}, ended)
                await feedback.instances.heartbeat(instance)

    asyncio.run(stopped())
    result = CliRunner().invoke(cli, ["inspect", "status", *config], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    rows = [line.strip("│").split("│") for line in result.output.splitlines() if line.startswith("│")]
    ids = [row[0].strip() for row in rows if row[0].strip()]  # a wrapped cell's lines below have none
    assert ids[0] == "3f9a0c1d" and len(ids) == 1 + STOPPED_SHOWN, result.output
    assert ids[1:] == [f"dead{n:04d}" for n in range(STOPPED_SHOWN)], result.output  # the newest stopped
    assert f"{40 - STOPPED_SHOWN} older stopped or stale instances not shown" in result.output, result.output
