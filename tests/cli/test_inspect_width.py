"""The `inspect` views at 80 columns: tools sharing a long prefix stay distinct rows (their names
shortened in the middle), `--wide` prints them whole; `plot` picks its slices from the log."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from tests.cli.test_views import cli_config
from tests.feedback.conftest import make_execution
from toolwise.cli.main import app as cli
from toolwise.cli.views import Column, distinct_names, fitted_table, plot_slices
from toolwise.feedback import FeedbackService, utcnow

GITHUB = [
    "github__list_pull_request_review_comments",
    "github__list_pull_request_reviews",
    "github__list_pull_request_files",
    "github__list_pull_request_commits",
]


def record(url: str, tools: list[str], namespaces: tuple[str, ...] = ("default",), every_s: float = 1.0) -> None:
    async def work() -> None:
        async with FeedbackService(url) as feedback:
            start = utcnow() - timedelta(seconds=every_s * len(tools))
            for namespace in namespaces:
                for i, tool in enumerate(tools):
                    execution = make_execution(tool, success=i % 3 > 0, reward=float(i % 7))
                    execution.namespace = namespace
                    execution.finished_at = start + timedelta(seconds=every_s * i)
                    await feedback.log.record_execution(execution)

    asyncio.run(work())


def table_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("│")]


@pytest.mark.parametrize("command", [["compare", "default", "other"], ["top-actions"]])
def test_a_view_at_80_columns_keeps_tools_with_one_long_prefix_apart(tmp_path: Path, command: list[str]) -> None:
    url, config = cli_config(tmp_path)
    record(url, GITHUB * 2, ("default", "other"))
    narrow = CliRunner().invoke(cli, ["inspect", *command, *config], env={"COLUMNS": "80"})
    wide = CliRunner().invoke(cli, ["inspect", *command, *config, "--wide"], env={"COLUMNS": "80"})
    assert narrow.exit_code == 0 and wide.exit_code == 0, narrow.output + wide.output
    rows = table_lines(narrow.output)
    assert len(rows) == 4 and max(len(line) for line in narrow.output.splitlines()) <= 80
    shown = [line.split("│")[1].strip() for line in rows]
    assert len(set(shown)) == 4 and all(n in GITHUB or ("…" in n and n.startswith("github")) for n in shown), shown
    assert any("…" in n for n in shown)  # without `--wide`, 80 columns are too few for the longest
    assert sorted(line.split("│")[1].strip() for line in table_lines(wide.output)) == sorted(GITHUB)


def test_the_learned_values_layout_fits_80_columns_with_distinct_tools() -> None:
    """`inspect qvalues`' seven columns: the query is cut at its end, the tool names in their middle."""
    columns = [Column("context"), Column("query", "text"), Column("previous tool", "name"), Column("tool", "name")]
    columns += [Column("confidence"), Column("prior"), Column("calls")]
    rows = [
        ["3f9a0c1d2e", "review the comments on my pull request", GITHUB[3], tool, "0.912", "0.80", "3"]
        for tool in GITHUB
    ]
    console = Console(width=80, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - recorded, not shown
    console.print(fitted_table(columns, rows, 80))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 80
    tools = [cell for line in lines if line.startswith("│") and (cell := line.split("│")[4].strip())]
    assert len(tools) == len(set(tools)) == len(GITHUB), tools  # one line each (the query wraps)


def test_names_equal_but_for_their_middle_fold_rather_than_collide() -> None:
    names = ["aaaaaaaa_one_zzzzzzzz", "aaaaaaaa_two_zzzzzzzz"]
    assert distinct_names(names, 8) is None  # no head/tail split of 8 characters tells them apart
    shown = distinct_names(names, 12)
    assert shown is not None and len(set(shown.values())) == 2 and all(len(v) <= 12 for v in shown.values())


def test_plot_picks_its_slices_from_the_log(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    url, config = cli_config(tmp_path)
    record(url, ["s__t"] * 144, every_s=2.0)  # a short log: 144 calls in under five minutes
    plot = tmp_path / "curves.png"
    result = CliRunner().invoke(cli, ["inspect", "plot", *config, "--output", str(plot)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # the console wraps at its width, after the path of tmp_path
    assert "144 calls in 12 slices of" in said  # √144, not the 100 slices of ~1.4 calls it drew
    assert [plot_slices(n) for n in (3, 144, 10_000, 10**8)] == [5, 12, 100, 100]


def test_the_snapshot_list_at_80_columns_keeps_each_creation_date_whole(tmp_path: Path) -> None:
    url, config = cli_config(tmp_path)
    record(url, ["time__get_current_time"])
    file = str(tmp_path / "state.snapshot")
    assert CliRunner().invoke(cli, ["snapshot", "dump", *config, "-o", file]).exit_code == 0
    for step in (["-i", file], ["-i", file], ["--previous"]):  # the longest source: "rollback"
        assert CliRunner().invoke(cli, ["snapshot", "restore", *config, *step]).exit_code == 0
    listed = CliRunner().invoke(cli, ["snapshot", "list", *config], env={"COLUMNS": "80"})
    rows = table_lines(listed.output)
    assert listed.exit_code == 0 and f"{utcnow():%Y-%m-%d}" in rows[0], listed.output
    assert all(len(line) <= 80 and line.endswith("│") for line in rows), listed.output
