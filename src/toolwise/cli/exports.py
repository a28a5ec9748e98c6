"""`toolwise inspect export` and `inspect plot`: the log written out, as JSON Lines or as learning
curves in a PNG; memory stays flat however long the log."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from toolwise.cli.common import (
    EXIT_FOUND,
    ConfigOption,
    DatabaseUrlOption,
    fail,
    install_beside_toolwise,
    output_between_reads,
    output_or_exit,
    writing,
)
from toolwise.cli.database import run
from toolwise.config import Settings
from toolwise.errors import UserError
from toolwise.feedback.records import utcnow

if TYPE_CHECKING:
    from toolwise.feedback import FeedbackService


def inspect_export(
    output: Annotated[Path, typer.Option("--output", "-o", help="JSON Lines file to write.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    since: Annotated[datetime | None, typer.Option(help="Only what happened from this time (UTC).")] = None,
    until: Annotated[datetime | None, typer.Option(help="Only what happened before this time (UTC).")] = None,
) -> None:
    """Everything recorded in the namespace as JSON Lines, one record a line.

    Each record has its "type": an "export" header, then every "execution", "rating", "episode", "action"
    (per-tool summary) and "snapshot". Written in chunks the database encodes: memory stays flat however
    long the log."""
    from toolwise.cli.console import console_beside, waiting
    from toolwise.feedback.export import execution_chunks, rating_chunks  # the store: when the command runs

    start, end = _utc(since), _utc(until)
    if start is not None and end is not None and start >= end:
        shown = f"--since {start:%Y-%m-%d %H:%M} is not before --until {end:%Y-%m-%d %H:%M} (UTC)"
        fail(f"{shown}: nothing would be exported; swap them", code=EXIT_FOUND)
    output_or_exit(output)
    report = console_beside(output)

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        ns = settings.namespace
        written = ratings = 0
        # binary: the executions come as the database's UTF-8 bytes, the few other lines are encoded here
        with output_between_reads(output) as out, waiting(report) as progress:
            header = {"namespace": ns, "exported_at": utcnow(), "since": start, "until": end}
            out.write(_line("export", header))
            # the namespace's count from its per-tool summaries (O(tools)): a bar's total, never a scan
            task = progress.add_task("exporting executions", total=await feedback.reads.count_executions(ns))
            await feedback.flush()
            chunks = execution_chunks(feedback.engine, namespace=ns, since=start, until=end, kind="execution")
            async for rows, text in chunks:
                out.write(text)
                written += rows
                progress.advance(task, rows)
            async for rows, text in rating_chunks(feedback.engine, namespace=ns, since=start, until=end, kind="rating"):
                out.write(text)
                ratings += rows
            async for episodes in feedback.reports.iter_episodes(namespace=ns, since=start, until=end):
                out.writelines(_line("episode", _plain(episode)) for episode in episodes)
            for action in await feedback.reports.action_summary(ns):
                out.write(_line("action", _plain(action)))
            for snapshot in await feedback.snapshots.list(ns):
                out.write(_line("snapshot", _plain(snapshot)))
        report.print(f"wrote {output}: {written} executions, {ratings} ratings")

    run(config, work, database_url, output=output)


def _utc(moment: datetime | None) -> datetime | None:
    """A time from the command line, read as UTC unless it names its zone."""
    if moment is None:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _line(kind: str, fields: dict[str, Any]) -> bytes:
    """One JSON Lines record, encoded (the export's file is written in bytes)."""
    return (json.dumps({"type": kind, **fields}, default=str) + "\n").encode()


def _plain(record: Any) -> dict[str, Any]:
    return {k: getattr(record, k) for k in record.__slots__ if k not in ("payload", "signature")}


def inspect_plot(
    output: Annotated[Path, typer.Option("--output", "-o", help="PNG file to write.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    hours: Annotated[
        float | None, typer.Option(min=0.01, help="How far back to look (default: the whole log).")
    ] = None,
    buckets: Annotated[
        int | None,
        typer.Option(min=1, help="Slices of time: the points of each curve (default: about √calls, 5 to 100)."),
    ] = None,
) -> None:
    """Learning curves as a picture: mean reward, success and exploration rate per slice of time.

    Aggregated by the database (as `inspect progress`): memory stays flat however long the log."""
    from toolwise.cli.console import console_beside, span, waiting
    from toolwise.cli.views import plot_slices

    output_or_exit(output)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        hint = install_beside_toolwise(["matplotlib"])  # the `plot` extra
        fail(f"plotting needs matplotlib, which is not installed beside this toolwise: {hint}", exc, EXIT_FOUND)

    report = console_beside(output)

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        since = None if hours is None else utcnow() - timedelta(hours=hours)
        with waiting(report) as progress:  # one grouped query: a spinner, no count
            progress.add_task("aggregating the execution log", total=None)
            whole = await feedback.reports.trend(namespace=settings.namespace, since=since, buckets=1)
            if not whole:
                raise UserError(f"no executions in namespace {settings.namespace!r} to plot")
            slices = buckets if buckets is not None else plot_slices(whole[0].calls)
            trend = await feedback.reports.trend(namespace=settings.namespace, since=since, buckets=slices)
        middle = [b.start + (b.end - b.start) / 2 for b in trend]
        nan = float("nan")
        fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
        for ax, values, label in (
            (axes[0], [nan if b.mean_reward is None else b.mean_reward for b in trend], "mean reward"),
            (axes[1], [b.success_rate for b in trend], "success rate"),
            (axes[2], [nan if b.exploration_rate is None else b.exploration_rate for b in trend], "exploration rate"),
        ):
            ax.plot(middle, values, linewidth=1.5, marker="." if len(trend) < 50 else None)
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
        width = span(trend[0].end - trend[0].start)
        axes[0].set_title(f"toolwise learning curves — {settings.namespace} (per slice of {width})")
        axes[2].set_xlabel("time (UTC)")
        fig.autofmt_xdate()
        fig.tight_layout()
        with writing(output):
            fig.savefig(output, dpi=100)
        plt.close(fig)
        report.print(f"wrote {output}: {sum(b.calls for b in trend)} calls in {len(trend)} slices of {width}")

    run(config, work, database_url, output=output)
