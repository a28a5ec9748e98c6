"""A year of history: what toolwise costs on a large log and a large catalogue, next to the targets.

    python bench/scale.py [--executions 100000] [--tools 500] [--reference 10000] [--catalogue 50,500,2000]
                          [--keep DIR [--reuse]]

Fills an SQLite database with the project's own insert path (`FeedbackService.log.record_execution`, ~1%
of executions rated through `add_rating`, a year of timestamps, sessions of ~8 calls), then starts
`toolwise serve` on it through the SDK's stdio client with a downstream of `--tools` tools and prints
start-up (no snapshot, then with the snapshot the first run left), the idle sync tick, one log batch,
recommend_tool and proxied p50/p99 (and the proxied p50 on a `--reference`-row database in the same
run), get_tool_metrics, `inspect progress`/`export` time and peak memory, and DB bytes per execution,
each next to the issue's target. The machine is shared: other processes' load moves every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from toolwise.config import Settings
from toolwise.feedback import Execution, FeedbackService, utcnow
from toolwise.feedback.export import execution_chunks
from toolwise.server.services import Services

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
QUERIES = [
    f"{verb} the {topic} {thing}"
    for verb in ("read", "write", "list", "find", "convert", "delete", "check")
    for topic in ("file", "git", "time", "search", "mail", "calendar", "database")
    for thing in ("items", "entries")
]


@dataclass
class Report:
    rows: list[tuple[str, str, str]] = field(default_factory=list)

    def add(self, figure: str, value: str, target: str = "") -> None:
        self.rows.append((figure, value, target))
        print(f"  {figure}: {value}" + (f"   (target {target})" if target else ""), file=sys.stderr, flush=True)

    def table(self) -> str:
        lines = ["| figure | measured | target |", "|---|---|---|"]
        lines += [f"| {a} | {b} | {c} |" for a, b, c in self.rows]
        return "\n".join(lines)


def sqlite_url(db: Path) -> str:
    return f"sqlite+aiosqlite:///{db}"


async def fill(db: Path, n: int, tools: int, seed: int = 0) -> float:
    """n executions (and ~1% ratings) over the last 365 days through FeedbackService; returns seconds."""
    rng = np.random.default_rng(seed)
    begin = time.perf_counter()
    start = utcnow() - timedelta(days=365)
    step = timedelta(days=365) / max(n, 1)
    weights = 1 / np.arange(1, tools + 1) ** 0.8
    picks = rng.choice(tools, size=n, p=weights / weights.sum())
    latencies = rng.lognormal(np.log(40), 0.8, size=n)
    successes = rng.random(n) < 0.9
    queries = rng.integers(0, len(QUERIES), size=n)
    rated = set(rng.choice(n, size=max(n // 100, 1), replace=False).tolist())
    rated_ids: list[str] = []
    async with FeedbackService(sqlite_url(db)) as feedback:
        session, position, previous = "s0", 0, None
        for i in range(n):
            if position >= 8:
                session, position, previous = f"s{i}", 0, None
            tool = f"many__tool_{picks[i]:04d}"
            finished = start + step * i
            e = Execution(
                tool=tool,
                server="many",
                session_id=session,
                success=bool(successes[i]),
                latency_ms=float(latencies[i]),
                started_at=finished - timedelta(milliseconds=float(latencies[i])),
                finished_at=finished,
                arguments={"text": f"call {i}"},
                query=QUERIES[queries[i]],
                previous_tool=previous,
                position=position,
                reward=(10.0 if successes[i] else -5.0) - 0.1 * latencies[i] / 1000,
                instance="bench-filler",
                error_type=None if successes[i] else "ToolError",
                error_message=None if successes[i] else "simulated failure",
            )
            await feedback.log.record_execution(e)
            if i in rated:
                rated_ids.append(e.id)
            session_prev = tool
            position += 1
            previous = session_prev
        await feedback.flush()
        for k, execution_id in enumerate(rated_ids):
            await feedback.log.add_rating(execution_id, int(1 + k % 5))
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return time.perf_counter() - begin


def filled(db: Path) -> int:
    """Executions in a database a run kept (0 if there is none)."""
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM executions").fetchone()[0])


def write_config(path: Path, db: Path, tools: int) -> Path:
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "many": {"command": sys.executable, "args": [str(HERE / "many_tools_server.py"), str(tools)]}
                },
                "toolwise": {"database_url": sqlite_url(db), "seed": 0},
            }
        )
    )
    return path


def server_pid() -> int | None:
    """The `toolwise serve` child of this process (for its memory)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and b"serve" in cmdline:
            return int(proc.name)
    return None


def rss_mb(pid: int | None) -> float:
    if pid is None:
        return float("nan")
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def caught_up(client: Client) -> None:
    """Return once toolwise no longer replays the log (get_learning_stats says "catching up" until then)."""
    for _ in range(20_000):
        result = await client.call_tool("get_learning_stats", {})
        if "catching up" not in (result.structured_content or {}).get("serving", ""):
            return
        await asyncio.sleep(0.25)  # polling is not free for the server: every call is served between batches
    raise TimeoutError("toolwise did not catch up with the log")


async def call_named(client: Client, names: list[str], start: int, text: str, i: int) -> Any:
    """The `i`-th call of a block that starts at `start` in `names`."""
    return await client.call_tool(names[start + i], {"text": f"{text} {start + i}"})


async def timed(calls: int, call: Callable[[int], Awaitable[Any]]) -> np.ndarray:
    out = []
    for i in range(calls):
        begin = time.perf_counter()
        result = await call(i)
        out.append((time.perf_counter() - begin) * 1000)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"call failed: {result.content}")
    return np.array(out)


@dataclass
class Run:
    initialize_s: float
    tools_list_s: float
    ready_s: float
    tools_list_ms: float
    rss_mb: float
    shutdown_s: float = 0.0
    proxied: np.ndarray | None = None
    recommend: np.ndarray | None = None
    metrics: np.ndarray | None = None


def params(config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(BIN / "toolwise"), args=["serve", "--config", str(config), "--log-level", "warning"]
    )


async def serve(config: Path, tools: int, calls: int = 0) -> Run:
    """Start toolwise, time it to its first answers and until it has caught up with the log, measure
    calls (when `calls`), then close stdin as a client does and time the shutdown."""
    begin = time.perf_counter()
    client = Client(params(config), read_timeout_seconds=900)
    await client.__aenter__()
    run = Run(0.0, 0.0, 0.0, 0.0, 0.0)
    try:
        initialized = time.perf_counter() - begin
        t = time.perf_counter()
        listed = await client.list_tools()
        listed_at = time.perf_counter() - begin
        list_ms = (time.perf_counter() - t) * 1000
        await caught_up(client)
        run = Run(initialized, listed_at, time.perf_counter() - begin, list_ms, rss_mb(server_pid()))
        if len(listed.tools) < tools:
            raise RuntimeError(f"toolwise listed {len(listed.tools)} tools, expected ≥ {tools}")
        lists = [await timed(1, lambda i: client.list_tools()) for _ in range(5)]
        run.tools_list_ms = float(np.median(np.concatenate(lists)))
        if calls:
            rng = np.random.default_rng(1)
            names = [f"many__tool_{k:04d}" for k in rng.integers(0, tools, size=calls + 50)]
            await timed(50, lambda i: client.call_tool(names[i], {"text": "warm"}))
            run.proxied = await timed(calls, lambda i: client.call_tool(names[50 + i], {"text": f"hello {i}"}))
            run.recommend = await timed(
                calls // 3, lambda i: client.call_tool("recommend_tool", {"query": QUERIES[i % len(QUERIES)]})
            )
            # 21 calls: the median of 5 moved from 13 to 29 ms between runs of the same code
            run.metrics = await timed(21, lambda i: client.call_tool("get_tool_metrics", {}))
            run.rss_mb = rss_mb(server_pid())
    finally:
        t = time.perf_counter()
        await client.__aexit__(None, None, None)
        run.shutdown_s = time.perf_counter() - t
    return run


async def paired_calls(configs: tuple[Path, Path], tools: int, calls: int) -> tuple[np.ndarray, np.ndarray]:
    """Proxied call latencies (ms) of two servers running at once (the reference log's and the large
    one's, each started from its snapshot and caught up), in alternating blocks of 20 calls: the same
    minutes of a shared machine for both, which two runs one after the other are not."""
    rng = np.random.default_rng(2)
    names = [f"many__tool_{k:04d}" for k in rng.integers(0, tools, size=calls + 50)]
    async with contextlib.AsyncExitStack() as stack:
        clients: list[Client] = []
        for config in configs:
            client = Client(params(config), read_timeout_seconds=900)
            await stack.enter_async_context(client)
            await client.list_tools()
            await caught_up(client)
            await timed(50, partial(call_named, client, names, 0, "warm"))
            clients.append(client)
        blocks: list[list[np.ndarray]] = [[], []]
        for start in range(50, 50 + calls, 20):
            for k, client in enumerate(clients):
                block = await timed(min(20, 50 + calls - start), partial(call_named, client, names, start, "hello"))
                blocks[k].append(block)
    return np.concatenate(blocks[0]), np.concatenate(blocks[1])


def snapshots(db: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT id, source FROM snapshots ORDER BY id").fetchall()


async def idle_tick(db: Path) -> InProcess:
    """Median ms of an idle `sync()` (nothing new), of one 1,000-row `iter_log` batch from mid-log and
    of one `iter_executions(since=…)` batch; and the seconds from an open database to the learned state
    of its newest snapshot plus the log after it (in-process: no interpreter or downstream start-up)."""
    settings = Settings(database_url=sqlite_url(db), seed=0)
    async with FeedbackService(settings.database_url) as feedback:
        services = Services.open(settings, feedback)
        begin = time.perf_counter()
        await services.snapshots.restore_latest()
        restored = time.perf_counter() - begin
        await services.sharing.sync()
        ticks = await timed(30, lambda i: services.sharing.sync())
        high, _ = await feedback.reads.high_water()

        async def one_log_batch(i: int) -> None:
            async for _ in feedback.reads.iter_log(after_seq=high // 2):
                return

        async def one_since_batch(i: int) -> None:
            async for _ in feedback.reports.iter_executions(since=utcnow() - timedelta(days=180)):
                return

        log_batch = await timed(3, one_log_batch)
        since_batch = await timed(3, one_since_batch)

        async def metrics_read(i: int) -> object:
            feedback.log.summaries_changed()  # read from the database, not the answer kept in memory
            return await feedback.reports.get_tool_metrics()

        metrics = await timed(5, metrics_read)
        exported = await export_rows(feedback)
    return InProcess(
        float(np.median(ticks)),
        float(np.median(log_batch)),
        float(np.median(since_batch)),
        restored,
        float(np.median(metrics)),
        exported,
    )


@dataclass
class InProcess:
    tick_ms: float
    log_batch_ms: float
    since_batch_ms: float
    restored_s: float
    metrics_ms: float
    export_rows_per_s: float


async def export_rows(feedback: FeedbackService) -> float:
    """Rows/s of the export's read-and-encode path alone (no interpreter start-up): JSON Lines built and
    joined by the database in chunks, as `inspect export` writes them."""
    begin, n = time.perf_counter(), 0
    with open(os.devnull, "wb") as out:  # noqa: ASYNC230 - a sink, never blocks
        async for rows, text in execution_chunks(feedback.engine):
            out.write(text)
            n += rows
    return n / (time.perf_counter() - begin)


def run_command(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, peak RSS (MB) and CPU seconds (user + system) of one command. The peak is the sum
    of the child's own VmHWM and its descendants' (an export's worker processes), sampled until it
    exits: a waited child's ru_maxrss on Linux starts from this (large) process's peak."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    begin = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peaks: dict[int, int] = {}
    while proc.poll() is None:
        for pid in [proc.pid, *descendants(proc.pid)]:
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:  # ended meanwhile
                continue
            hwm = [int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")]
            peaks[pid] = max([peaks.get(pid, 0), *hwm])
        time.sleep(0.02)
    _, err = proc.communicate()
    seconds = time.perf_counter() - begin
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(command)} failed: {err.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return seconds, sum(peaks.values()) / 1024, cpu


def descendants(root: int) -> list[int]:
    """The processes below `root`, from each process's parent in /proc/<pid>/stat."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # ended meanwhile
            continue
        parent[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        below = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += below
        frontier = below
    return found


def run_cli(*args: str) -> tuple[float, float]:
    """Seconds and peak RSS (MB) of one `toolwise …` command."""
    seconds, peak_mb, _ = run_command([str(BIN / "toolwise"), *args])
    return seconds, peak_mb


async def ensure_snapshot(db: Path) -> None:
    """A snapshot to start from, when the shutdown did not leave one (as the issue reports)."""
    settings = Settings(database_url=sqlite_url(db), seed=0)
    async with FeedbackService(settings.database_url) as feedback:
        snapshots = Services.open(settings, feedback).snapshots
        await snapshots.restore_latest()
        await snapshots.save("manual")


def p(values: np.ndarray | None, q: float) -> float:
    return float(np.percentile(values, q)) if values is not None else float("nan")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=100_000)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--reference", type=int, default=10_000, help="rows of the reference database")
    parser.add_argument("--calls", type=int, default=300, help="proxied calls measured per run")
    parser.add_argument("--catalogue", default="50,500,2000", help="catalogue sizes for tools/list and RSS ('' skips)")
    parser.add_argument("--keep", type=Path, help="keep the databases in this folder")
    parser.add_argument(
        "--reuse", action="store_true", help="with --keep: start from the databases kept there (snapshots dropped)"
    )
    args = parser.parse_args()
    n, report = args.executions, Report()
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        print(f"filling {args.reference:,} and {n:,} executions…", file=sys.stderr, flush=True)
        ref_db, db = work / "reference.db", work / "scale.db"
        if args.reuse and args.keep and all(filled(path) >= rows for path, rows in ((ref_db, args.reference), (db, n))):
            for path in (ref_db, db):  # the cold start must replay the whole log
                with sqlite3.connect(path) as conn:
                    conn.execute("DELETE FROM snapshots")
            report.add("fill (record_execution + add_rating)", f"reused the databases in {work}")
        else:
            for path in (ref_db, db):
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{path}{suffix}").unlink(missing_ok=True)  # noqa: ASYNC240 - before anything runs
            await fill(ref_db, args.reference, args.tools)
            fill_s = await fill(db, n, args.tools, seed=1)
            report.add("fill (record_execution + add_rating)", f"{fill_s:.1f} s ({n / fill_s:,.0f} rows/s)")
        report.add("database size", f"{db.stat().st_size / 1e6:.0f} MB, {db.stat().st_size / n:.0f} bytes an execution")

        ref = await serve(write_config(work / "ref.json", ref_db, args.tools), args.tools, args.calls)
        config = write_config(work / "scale.json", db, args.tools)
        cold = await serve(config, args.tools, args.calls)
        stored = [s for s in snapshots(db) if s[1] == "shutdown"]
        report.add(
            "start-up, no snapshot (full replay): answers / caught up",
            f"{cold.tools_list_s:.1f} s / {cold.ready_s:.1f} s",
            "< 60 s at 1M",
        )
        report.add("shutdown on stdin close", f"{cold.shutdown_s:.2f} s, snapshot stored: {'yes' if stored else 'no'}")
        if not stored:
            await ensure_snapshot(db)
        warm = await serve(config, args.tools)
        report.add(
            "start-up with a snapshot: answers / caught up",
            f"{warm.tools_list_s:.1f} s / {warm.ready_s:.1f} s",
            "< 3 s at 1M",
        )
        inproc = await idle_tick(db)
        report.add("learned state from the snapshot + tail, in-process", f"{inproc.restored_s:.2f} s", "< 3 s at 1M")
        report.add("idle sync tick", f"{inproc.tick_ms:.2f} ms", "< 2 ms at 1M")
        report.add(
            "one 1,000-row iter_log batch / iter_executions(since) batch",
            f"{inproc.log_batch_ms:.1f} / {inproc.since_batch_ms:.1f} ms",
        )
        report.add("recommend_tool p50 / p99", f"{p(cold.recommend, 50):.1f} / {p(cold.recommend, 99):.1f} ms")
        report.add(
            f"proxied call p50 / p99 ({n:,} rows; {args.reference:,} rows in its own run)",
            f"{p(cold.proxied, 50):.2f} / {p(cold.proxied, 99):.2f} ms ({p(ref.proxied, 50):.2f} ms: "
            f"{p(cold.proxied, 50) / p(ref.proxied, 50):.2f}×)",
        )
        small, large = await paired_calls((work / "ref.json", config), args.tools, args.calls)
        report.add(
            f"proxied call p50 / p99, both running, alternating blocks ({n:,} rows)",
            f"{p(large, 50):.2f} / {p(large, 99):.2f} ms",
            f"p50 within 10% of {p(small, 50):.2f} ms ({args.reference:,} rows): {p(large, 50) / p(small, 50):.2f}×",
        )
        report.add(
            "get_tool_metrics, all tools: MCP round trip / FeedbackService",
            f"{p(cold.metrics, 50):.1f} / {inproc.metrics_ms:.1f} ms",
            "< 20 ms at 1M",
        )
        seconds, peak = run_cli("inspect", "status", "--config", str(config))
        report.add(
            "reference: `inspect status` (CLI start-up, a few small queries)", f"{seconds:.1f} s, {peak:.0f} MB peak"
        )
        seconds, peak = run_cli("inspect", "progress", "--config", str(config), "--hours", "9000")
        report.add("inspect progress", f"{seconds:.1f} s, {peak:.0f} MB peak")
        out = work / "export.out"
        seconds, peak = run_cli("inspect", "export", "--config", str(config), "--output", str(out))
        report.add(
            "inspect export",
            f"{seconds:.1f} s ({n / seconds:,.0f} rows/s), {peak:.0f} MB peak, {out.stat().st_size / 1e6:.0f} MB file",
            "≥ 200k rows/s, < 200 MB",
        )
        report.add(
            "export read-and-encode path, in-process", f"{inproc.export_rows_per_s:,.0f} rows/s", "≥ 200k rows/s"
        )
        report.add("server RSS after the calls", f"{cold.rss_mb:.0f} MB")
        sizes = [int(s) for s in args.catalogue.split(",") if s.strip()]
        rss = []
        for size in sizes:
            empty = work / f"catalogue-{size}.db"
            empty.unlink(missing_ok=True)
            run = await serve(write_config(work / f"catalogue-{size}.json", empty, size), size)
            rss.append(run.rss_mb)
            report.add(
                f"catalogue of {size:,} tools: tools/list / RSS", f"{run.tools_list_ms:.1f} ms / {run.rss_mb:.0f} MB"
            )
        if len(sizes) > 1:
            per_tool = (rss[-1] - rss[0]) * 1024 / (sizes[-1] - sizes[0])
            report.add(f"RSS growth per tool ({sizes[0]:,} → {sizes[-1]:,} tools)", f"{per_tool:.0f} KB")
    print(f"\nbench/scale.py --executions {n} --tools {args.tools} (2-core shared machine)\n")
    print(report.table())


if __name__ == "__main__":
    asyncio.run(main())
