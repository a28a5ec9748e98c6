"""`toolwise snapshot …` and `toolwise inspect …`: the admin's view of what was learned, from the
database (and its newest snapshot) alone; no running server is needed. The views that read only the
log (status, top-actions, compare, progress, export, plot) import neither the MCP server nor the
learning services: they start in the time the interpreter, SQLAlchemy and the CLI take."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from sqlalchemy.engine import make_url

from toolwise.cli.common import ConfigOption, DatabaseUrlOption, database_or_exit, settings_or_exit
from toolwise.cli.views import Column, fitted_table, natural_width, plot_slices
from toolwise.config import Settings
from toolwise.errors import UserError
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.engine import open_private, sqlite_path
from toolwise.feedback.export import execution_chunks, rating_chunks
from toolwise.feedback.instances import liveness
from toolwise.learning import snapshots

if TYPE_CHECKING:
    from toolwise.server.services import Services

console = Console()
WideOption = Annotated[bool, typer.Option("--wide", help="Full tool names, however wide the table gets.")]


def print_fitted(columns: list[Column], rows: list[list[str]], wide: bool, title: str | None = None) -> None:
    """A table at the terminal's width (names shortened in the middle, kept distinct), or whole (`--wide`)."""
    table = fitted_table(columns, rows, None if wide else console.width, title=title)
    if wide:  # rich squeezes a table into its console's width: this one is as wide as the table needs
        Console(width=max(console.width, natural_width(columns, rows))).print(table)
    else:
        console.print(table)


snapshot_app = typer.Typer(help="Dump, restore and list snapshots of the learned state.", no_args_is_help=True)
inspect_app = typer.Typer(help="What toolwise learned, from its database.", no_args_is_help=True)


def run(
    config: Path | None,
    work: Callable[[Settings, FeedbackService], Awaitable[None]],
    database_url: str | None = None,
    create: bool = False,
) -> None:
    """`work` on the database of CONFIG (or --database-url). A command that only reads (`create` false)
    refuses an SQLite file that does not exist rather than leave an empty database behind."""
    settings = settings_or_exit(config, database_url)
    path = sqlite_path(settings.database_url)
    if not create and path is not None and not path.exists():
        console.print(
            f"[red]toolwise: no database at {path}: nothing was recorded there yet[/red] (`toolwise serve` "
            "records into it; `toolwise demo` into a database of its own, and it prints how to read that one)"
        )
        raise typer.Exit(1)

    async def main() -> None:
        async with FeedbackService(settings.database_url) as feedback:
            await work(settings, feedback)

    try:
        with database_or_exit():
            asyncio.run(main())
    except (UserError, ValueError) as exc:  # what the user asked is refused, the message says why
        console.print(f"[red]toolwise: {exc}[/red]")
        raise typer.Exit(1) from exc


async def _current(settings: Settings, feedback: FeedbackService) -> Services:
    """The services with a learner in the state of the newest usable snapshot, with the log after it
    replayed."""
    from toolwise.server.services import Services  # the learning services and the server: only here

    services = Services.open(settings, feedback)
    await services.snapshots.restore_latest()
    return services


# -- snapshot ------------------------------------------------------------------------------------------


@snapshot_app.command("dump")
def snapshot_dump(
    output: Annotated[Path, typer.Option("--output", "-o", help="Snapshot file to write.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    snapshot_id: Annotated[
        int | None, typer.Option("--id", help="A stored snapshot (default: the current state).")
    ] = None,
    sign_key: Annotated[Path | None, typer.Option(help="Ed25519 private key (PEM): write OUTPUT.sig.")] = None,
) -> None:
    """Write a snapshot file: the state as of now (newest snapshot + the log after it), or a stored one."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        if snapshot_id is None:
            record = (await _current(settings, feedback)).snapshots.snapshot("manual")
        else:
            found = await feedback.snapshots.get(snapshot_id, namespace=settings.namespace)
            if found is None:
                raise ValueError(f"no snapshot {snapshot_id} in namespace {settings.namespace!r}")
            record = found
        if sign_key is not None:
            record = snapshots.sign(record, snapshots.load_private_key(sign_key))
        snapshots.write_file(record, output)
        signed = f", signature in {snapshots.signature_path(output)}" if record.signature else ""
        console.print(
            f"wrote {output}: version {record.version}, policy {record.policy}, {record.sample_count} samples, "
            f"sha256 {record.sha256}{signed}"
        )

    run(config, work, database_url)


@snapshot_app.command("restore")
def snapshot_restore(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    input_path: Annotated[Path | None, typer.Option("--input", "-i", help="Snapshot file to restore.")] = None,
    previous: Annotated[
        bool, typer.Option("--previous", help="Roll back to the snapshot before the current one.")
    ] = False,
    snapshot_id: Annotated[int | None, typer.Option("--id", help="A stored snapshot to restore.")] = None,
    verify_key: Annotated[
        Path | None, typer.Option(help="Ed25519 public key (PEM): the signature must verify.")
    ] = None,
) -> None:
    """Make a snapshot the learned state (running instances adopt it at their next sync). A wrong
    checksum, a bad signature or another major version is refused and nothing changes."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        if verify_key is not None:
            settings = settings.model_copy(update={"snapshot_verify_key": verify_key})
        from toolwise.server.services import Services

        restoring = Services.open(settings, feedback).snapshots
        path = str(input_path) if input_path is not None else None
        record = await restoring.choose(snapshot_id, path, previous)
        adopted = await restoring.adopt(record, "rollback" if previous else "restore")
        console.print(
            f"restored snapshot as #{adopted.id} ({adopted.source}): version {adopted.version}, "
            f"{adopted.sample_count} samples, sha256 {adopted.sha256[:16]}…"
        )

    run(config, work, database_url, create=input_path is not None)  # a file may seed a new database


@snapshot_app.command("list")
def snapshot_list(config: ConfigOption = None, database_url: DatabaseUrlOption = None) -> None:
    """The stored snapshots, newest first."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        table = Table("id", "created", "source", "version", "policy", "samples", "sha256", "signed")
        for r in await feedback.snapshots.list(settings.namespace):
            table.add_row(
                str(r.id),
                f"{r.created_at:%Y-%m-%d %H:%M:%S}",
                r.source,
                r.version,
                r.policy,
                str(r.sample_count),
                r.sha256[:16],
                "yes" if r.signature else "no",
            )
        console.print(table)

    run(config, work, database_url)


@snapshot_app.command("keygen")
def snapshot_keygen(
    private: Annotated[Path, typer.Option(help="Where to write the private key (PEM, mode 600).")],
    public: Annotated[Path, typer.Option(help="Where to write the public key (PEM).")],
    force: Annotated[bool, typer.Option("--force", help="Replace existing key files.")] = False,
) -> None:
    """A new Ed25519 key pair for signing snapshots (existing key files are kept unless --force)."""
    try:
        snapshots.generate_keys(private, public, force=force)
    except snapshots.SnapshotError as exc:
        console.print(f"[red]toolwise: {exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"wrote {private} and {public}")


# -- inspect -------------------------------------------------------------------------------------------


@inspect_app.command("qvalues")
def inspect_qvalues(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool.")] = None,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
    wide: WideOption = False,
) -> None:
    """Learned values per context seen in the log, best first: Q is the expected reward rescaled to 0..1
    by the reward's bounds, an estimate that can stray a little past them."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        from toolwise.learning.service import with_session_query

        learning = (await _current(settings, feedback)).learning
        recent = await feedback.reports.get_recent_executions(2000, namespace=settings.namespace)
        contexts: dict[str, tuple[str | None, str | None, int, dict[str, int]]] = {}
        for e in recent:
            e = await with_session_query(feedback, e, settings.namespace)  # noqa: PLW2901 - a query is stored once per session decision
            key = learning.learner.encode(e.query, e.previous_tool, e.position).hash
            entry = contexts.setdefault(key, (e.query, e.previous_tool, e.position, {}))
            entry[3][e.tool] = entry[3].get(e.tool, 0) + 1
        rows = []
        for key, (query, previous, position, counts) in contexts.items():
            for name, value, prior in learning.learner.estimates(query, previous, position):
                if (tool is None or name == tool) and (tool is not None or name in counts):
                    rows.append((value, key, query, previous, name, prior, counts.get(name, 0)))
        rows.sort(key=lambda r: -r[0])
        columns = [Column("context"), Column("query", "text"), Column("previous\ntool", "name"), Column("tool", "name")]
        shown = [
            [key[:8], (query or "")[:40], previous or "-", name, f"{value:.3f}", f"{prior:.2f}", str(n)]
            for value, key, query, previous, name, prior, n in rows[:limit]
        ]
        print_fitted([*columns, Column("Q"), Column("prior"), Column("calls")], shown, wide, "learned values")
        console.print(
            f"{learning.learner.policy.name}: {learning.learner.updates} updates, {len(contexts)} contexts; "
            "Q: expected reward on 0..1 (an estimate: it can stray past 1)"
        )

    run(config, work, database_url)


@inspect_app.command("progress")
def inspect_progress(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    hours: Annotated[float, typer.Option(help="How far back to look.")] = 24.0,
    buckets: Annotated[int, typer.Option(help="Slices of time.")] = 12,
) -> None:
    """Reward trend: calls, mean reward, success and exploration rate per slice of the last HOURS."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        with Progress(console=console, transient=True) as progress:  # one grouped query: a spinner, no count
            progress.add_task("aggregating the execution log", total=None)
            since = utcnow() - timedelta(hours=hours)
            trend = await feedback.reports.trend(namespace=settings.namespace, since=since, buckets=buckets)
        # Slices split the span the executions cover (not the whole look-back), so each row is labelled
        # with the span it covers and the title says how long that is.
        width = trend[0].end - trend[0].start if trend else timedelta(0)
        title = (
            f"{_span(trend[-1].end - trend[0].start)} of executions in the last {hours:g} h, "
            f"in slices of {_span(width)}"
            if trend
            else f"no executions in the last {hours:g} h"
        )
        fine = "%H:%M:%S.%f" if width < timedelta(seconds=10) else "%H:%M:%S"
        table = Table("span", "calls", "mean reward", "success", "explored", title=title)
        for b in trend:
            rate = "-" if b.exploration_rate is None else f"{b.exploration_rate:.0%}"
            mean = "-" if b.mean_reward is None else f"{b.mean_reward:.2f}"
            label = f"{b.start:%Y-%m-%d} {b.start.strftime(fine)[:12]}–{b.end.strftime(fine)[:12]}"
            table.add_row(label, str(b.calls), mean, f"{b.success_rate:.0%}", rate)
        console.print(table)
        console.print(f"{sum(b.calls for b in trend)} executions")

    run(config, work, database_url)


@inspect_app.command("top-actions")
def inspect_top_actions(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    limit: Annotated[int, typer.Option(help="Rows to show.")] = 20,
    wide: WideOption = False,
) -> None:
    """Tools by use, with mean reward, success rate and how often they were tried by exploration."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        rows = [
            [a.tool, str(a.calls), "-" if a.mean_reward is None else f"{a.mean_reward:.2f}", f"{a.success_rate:.0%}",
             str(a.explored)]
            for a in (await feedback.reports.action_summary(settings.namespace))[:limit]
        ]  # fmt: skip
        figures = ["calls", "mean reward", "success", "explored"]
        print_fitted([Column("tool", "name"), *map(Column, figures)], rows, wide, "top actions")

    run(config, work, database_url)


@inspect_app.command("compare")
def inspect_compare(
    ns1: str, ns2: str, config: ConfigOption = None, database_url: DatabaseUrlOption = None, wide: WideOption = False
) -> None:
    """Two namespaces side by side: calls and mean reward per tool."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        left = {a.tool: a for a in await feedback.reports.action_summary(ns1)}
        right = {a.tool: a for a in await feedback.reports.action_summary(ns2)}
        for name, found in ((ns1, left), (ns2, right)):
            if not found:
                known = ", ".join(repr(n) for n in await feedback.reports.namespaces()) or "none"
                console.print(
                    f"[yellow]warning: no executions in namespace {name!r} of {_shown(settings.database_url)} "
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


@inspect_app.command("status")
def inspect_status(config: ConfigOption = None, database_url: DatabaseUrlOption = None) -> None:
    """Instances (heartbeat, downstreams, health, circuits, policy), counts and the newest snapshot."""

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        now = utcnow()
        table = Table("instance", "host/pid", "state", "serving", "downstreams", "circuits", "calls", title="instances")
        for i in await feedback.instances.list(settings.namespace):
            s = i.status
            state = liveness(i, now)[1]
            if s.get("store", "ok") != "ok":
                state += f"; store {s['store']}"
            downstreams = ", ".join(f"{d['server']}: {d['state']}" for d in s.get("downstreams", []))
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
        for i in await feedback.instances.list(settings.namespace):
            if not i.stopped_at and i.status.get("epsilon_reason"):
                console.print(f"{i.id[:8]} exploration: {i.status['epsilon_reason']}")
                for drift in i.status.get("drifts", []):
                    console.print(f"{i.id[:8]} drift: {drift}")
        listed = await feedback.snapshots.list(settings.namespace)
        newest = f"#{listed[0].id} {listed[0].source} {listed[0].created_at:%Y-%m-%d %H:%M:%S}" if listed else "none"
        console.print(
            f"namespace {settings.namespace!r} of {_shown(settings.database_url)}: policy {settings.policy}, "
            f"{await feedback.reads.count_executions(settings.namespace)} executions, newest snapshot {newest}"
        )

    run(config, work, database_url)


@inspect_app.command("export")
def inspect_export(
    output: Annotated[Path, typer.Option("--output", "-o", help="JSON Lines file to write.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    since: Annotated[datetime | None, typer.Option(help="Only what happened from this time (UTC).")] = None,
    until: Annotated[datetime | None, typer.Option(help="Only what happened before this time (UTC).")] = None,
) -> None:
    """Everything recorded in the namespace as JSON Lines, one record a line, each with its "type":
    an "export" header, then every "execution", "rating", "episode", "action" (per-tool summary) and
    "snapshot". Written in chunks the database encodes: memory stays flat however long the log."""
    start, end = _utc(since), _utc(until)

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        ns = settings.namespace
        written = ratings = 0
        # binary: the executions come as the database's UTF-8 bytes, the few other lines are encoded here
        with open_private(output) as out, Progress(console=console, transient=True) as progress:
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
        console.print(f"wrote {output}: {written} executions, {ratings} ratings")

    run(config, work, database_url)


@inspect_app.command("evaluate")
def inspect_evaluate(
    policy: Annotated[str, typer.Argument(help="The candidate policy (ucb, thompson, linucb, lints, semantic).")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    epsilon: Annotated[float | None, typer.Option(help="Another ε (default: the policy's).")] = None,
    prior_weight: Annotated[float | None, typer.Option(help="Another prior weight (default: the policy's).")] = None,
    frozen: Annotated[
        bool, typer.Option("--frozen", help="Learn the first TRAIN-FRACTION of the log, evaluate the rest.")
    ] = False,
    train_fraction: Annotated[float, typer.Option(min=0.01, max=0.99)] = 0.5,
    confidence: Annotated[float, typer.Option(min=0.5, max=0.999)] = 0.95,
    min_matches: Annotated[int | None, typer.Option(help="Refuse below this many matching decisions.")] = None,
    min_ess: Annotated[float | None, typer.Option(help="Refuse below this effective sample size.")] = None,
    max_unsupported: Annotated[
        float | None, typer.Option(help="Refuse above this fraction of certain decisions the candidate departs from.")
    ] = None,
    seed: int = 0,
) -> None:
    """Would another policy (ε, prior weight) have done better? Its estimated mean reward on the logged
    decisions (IPS, SNIPS, doubly robust) next to the logged policy's own, replayed in log order."""
    from toolwise.server.evaluation import EvaluateInput, evaluate_policy

    given = {"min_matches": min_matches, "min_ess": min_ess, "max_unsupported": max_unsupported}
    limits: dict[str, Any] = {k: v for k, v in given.items() if v is not None}  # EvaluateInput checks them

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        from toolwise.learning.sessions import Session
        from toolwise.server.services import Services

        args = EvaluateInput(
            policy=policy,
            epsilon=epsilon,
            prior_weight=prior_weight,
            frozen=frozen,
            train_fraction=train_fraction,
            confidence=confidence,
            seed=seed,
            **limits,
        )
        services = Services.open(settings, feedback)
        await services.snapshots.load_latest()  # for the catalogue it knew: the evaluation replays the log itself
        with Progress(console=console, transient=True) as progress:
            progress.add_task(f"replaying the log through {policy}", total=None)
            found = await evaluate_policy(services, args, Session("inspect"))
        level = f"{found.confidence:.0%} interval"
        table = Table("estimator", "mean reward", level, "std. error", title=found.candidate)
        for name, e in (("logged policy", found.logged), ("IPS", found.ips), ("SNIPS", found.snips), ("DR", found.dr)):
            table.add_row(name, f"{e.mean_reward:.3f}", f"[{e.low:.3f}, {e.high:.3f}]", f"{e.stderr:.3f}")
        console.print(table)
        console.print(
            f"{found.decisions} logged decisions of {found.namespace!r}, {found.matches} where the candidate "
            f"picked the logged tool, effective sample size {found.effective_sample_size:.1f}; "
            f"intervals: {found.interval}"
        )
        for note in found.notes():
            console.print(note)

    run(config, work, database_url)


def _shown(url: str) -> str:
    """A database URL as printed: which database was read, never its password."""
    return make_url(url).render_as_string(hide_password=True)


def _span(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"


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


@inspect_app.command("plot")
def inspect_plot(
    output: Annotated[Path, typer.Option("--output", "-o", help="PNG file to write.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    hours: Annotated[float | None, typer.Option(help="How far back to look (default: the whole log).")] = None,
    buckets: Annotated[
        int | None,
        typer.Option(min=1, help="Slices of time: the points of each curve (default: about √calls, 5 to 100)."),
    ] = None,
) -> None:
    """Learning curves as a picture: mean reward, success rate and exploration rate per slice of time,
    aggregated by the database (as `inspect progress`): memory stays flat however long the log."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        console.print("[red]toolwise: plotting needs matplotlib: pip install 'toolwise[plot]'[/red]")
        raise typer.Exit(1) from exc

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        since = None if hours is None else utcnow() - timedelta(hours=hours)
        with Progress(console=console, transient=True) as progress:  # one grouped query: a spinner, no count
            progress.add_task("aggregating the execution log", total=None)
            whole = await feedback.reports.trend(namespace=settings.namespace, since=since, buckets=1)
            if not whole:
                raise ValueError(f"no executions in namespace {settings.namespace!r} to plot")
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
        width = _span(trend[0].end - trend[0].start)
        axes[0].set_title(f"toolwise learning curves — {settings.namespace} (per slice of {width})")
        axes[2].set_xlabel("time (UTC)")
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(output, dpi=100)
        plt.close(fig)
        console.print(f"wrote {output}: {sum(b.calls for b in trend)} calls in {len(trend)} slices of {width}")

    run(config, work, database_url)
