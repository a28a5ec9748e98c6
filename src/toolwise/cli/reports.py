"""`toolwise inspect progress`, `top-actions`, `compare` and `status`: tables of what the log holds,
aggregated by the database."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from toolwise.cli.common import ConfigOption, DatabaseUrlOption, WideOption
from toolwise.cli.database import run
from toolwise.config import Settings
from toolwise.feedback.records import utcnow

if TYPE_CHECKING:
    from toolwise.feedback import FeedbackService

# Every start of toolwise leaves a row in `instances` (a stdio client starts one per session): `inspect status`
# shows the alive ones and this many of the newest stopped or stale, not every one that ever ran.
STOPPED_SHOWN = 5


def inspect_progress(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    hours: Annotated[float, typer.Option(min=0.01, help="How far back to look.")] = 24.0,
    buckets: Annotated[int, typer.Option(min=1, help="Slices of time.")] = 12,
) -> None:
    """Reward trend: calls, mean reward, success and exploration rate per slice of the last HOURS."""
    from rich.table import Table

    from toolwise.cli.console import console, span, waiting

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        with waiting() as progress:  # one grouped query: a spinner, no count
            progress.add_task("aggregating the execution log", total=None)
            since = utcnow() - timedelta(hours=hours)
            trend = await feedback.reports.trend(namespace=settings.namespace, since=since, buckets=buckets)
        # Slices split the span the executions cover (not the whole look-back), so each row is labelled
        # with the span it covers and the title says how long that is.
        width = trend[0].end - trend[0].start if trend else timedelta(0)
        title = (
            f"{span(trend[-1].end - trend[0].start)} of executions in the last {hours:g} h, in slices of {span(width)}"
            if trend
            else f"no executions in the last {hours:g} h"
        )
        table = Table("span", "calls", "mean reward", "success", "explored", title=title)
        for b in trend:
            rate = "-" if b.exploration_rate is None else f"{b.exploration_rate:.0%}"
            mean = "-" if b.mean_reward is None else f"{b.mean_reward:.2f}"
            table.add_row(_slice_label(b.start, b.end, width), str(b.calls), mean, f"{b.success_rate:.0%}", rate)
        console.print(table)
        console.print(f"{sum(b.calls for b in trend)} executions")

    run(config, work, database_url)


def _slice_label(start: datetime, end: datetime, width: timedelta) -> str:
    """A slice's span: its day and times (to the millisecond when slices are seconds wide), or both its days
    when it is a day or wider (one day and two equal times read as a slice of no time at all)."""
    if width >= timedelta(days=1):
        return f"{start:%Y-%m-%d %H:%M}–{end:%Y-%m-%d %H:%M}"
    fine = "%H:%M:%S.%f" if width < timedelta(seconds=10) else "%H:%M:%S"
    return f"{start:%Y-%m-%d} {start.strftime(fine)[:12]}–{end.strftime(fine)[:12]}"


def inspect_top_actions(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    limit: Annotated[int, typer.Option(min=1, help="Rows to show.")] = 20,
    wide: WideOption = False,
) -> None:
    """Tools by use, with mean reward, success rate and how often they were tried by exploration."""
    from toolwise.cli.console import print_fitted
    from toolwise.cli.views import Column

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        rows = [
            [a.tool, str(a.calls), "-" if a.mean_reward is None else f"{a.mean_reward:.2f}", f"{a.success_rate:.0%}",
             str(a.explored)]
            for a in (await feedback.reports.action_summary(settings.namespace))[:limit]
        ]  # fmt: skip
        figures = ["calls", "mean reward", "success", "explored"]
        print_fitted([Column("tool", "name"), *map(Column, figures)], rows, wide, "top actions")

    run(config, work, database_url)


def inspect_compare(
    ns1: str, ns2: str, config: ConfigOption = None, database_url: DatabaseUrlOption = None, wide: WideOption = False
) -> None:
    """Two namespaces side by side: calls and mean reward per tool."""
    from toolwise.cli.console import console, print_fitted
    from toolwise.cli.views import Column

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        from toolwise.feedback import shown_url

        left = {a.tool: a for a in await feedback.reports.action_summary(ns1)}
        right = {a.tool: a for a in await feedback.reports.action_summary(ns2)}
        for name, found in ((ns1, left), (ns2, right)):
            if not found:
                known = ", ".join(repr(n) for n in await feedback.reports.namespaces()) or "none"
                console.print(
                    f"[yellow]warning: no executions in namespace {name!r} of {shown_url(settings.database_url)} "
                    f"(namespaces there: {known})[/yellow]"
                )
        rows = []
        for name in sorted(left.keys() | right.keys()):
            a, b = left.get(name), right.get(name)
            ra, rb = (a.mean_reward if a else None), (b.mean_reward if b else None)
            delta = f"{rb - ra:+.2f}" if ra is not None and rb is not None else "-"
            rows.append(
                [
                    name,
                    str(a.calls if a else 0),
                    "-" if ra is None else f"{ra:.2f}",
                    str(b.calls if b else 0),
                    "-" if rb is None else f"{rb:.2f}",
                    delta,
                ]
            )
        figures = [f"{ns1}\ncalls", f"{ns1}\nreward", f"{ns2}\ncalls", f"{ns2}\nreward", "Δ reward"]
        print_fitted([Column("tool", "name"), *map(Column, figures)], rows, wide)

    run(config, work, database_url)


def inspect_status(config: ConfigOption = None, database_url: DatabaseUrlOption = None) -> None:
    """Instances (heartbeat, downstreams, health, circuits, policy), counts and the newest snapshot.

    Every alive instance, and the newest few stopped or stale ones (each start of toolwise leaves one)."""
    from rich.table import Table

    from toolwise.cli.console import console

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        from toolwise.feedback import shown_url
        from toolwise.feedback.instances import liveness

        now = utcnow()
        table = Table(title="instances")
        # Headers of at most 8 characters: squeezed into 80 columns, rich narrows the widest columns to about
        # that, and cuts a longer header ("downstrea…"); a cell too long wraps (a word too long folds), never cut.
        for header in ("instance", "host/pid", "state", "serving", "servers", "circuits", "calls"):
            table.add_column(header, overflow="fold")
        instances = await feedback.instances.list(settings.namespace)  # the most recently heard from first
        gone = [i.id for i in instances if liveness(i, now)[0] != "alive"]  # stopped, or stale (killed, hung)
        left_out = set(gone[STOPPED_SHOWN:])
        shown = [i for i in instances if i.id not in left_out]
        for i in shown:
            s = i.status
            state = liveness(i, now)[1]
            if s.get("store", "ok") != "ok":
                state += f"; store {s['store']}"
            downstreams = "\n".join(f"{d['server']}: {d['state']}" for d in s.get("downstreams", []))
            circuits = ", ".join(s.get("open_circuits", [])) or "all closed"
            table.add_row(
                i.id[:8],
                f"{i.host}/{i.pid}",
                state,
                s.get("serving", "?"),
                downstreams,
                circuits,
                str(s.get("calls", 0)),
            )
        console.print(table)
        if left_out:
            console.print(f"{len(left_out)} older stopped or stale instances not shown")
        for i in shown:
            if not i.stopped_at and i.status.get("epsilon_reason"):
                console.print(f"{i.id[:8]} exploration: {i.status['epsilon_reason']}")
                for drift in i.status.get("drifts", []):
                    console.print(f"{i.id[:8]} drift: {drift}")
        listed = await feedback.snapshots.list(settings.namespace)
        newest = f"#{listed[0].id} {listed[0].source} {listed[0].created_at:%Y-%m-%d %H:%M:%S}" if listed else "none"
        console.print(
            f"namespace {settings.namespace!r} of {shown_url(settings.database_url)}: policy {settings.policy}, "
            f"{await feedback.reads.count_executions(settings.namespace)} executions, newest snapshot {newest}"
        )

    run(config, work, database_url)
