"""What a large answer costs over stdio, split between the client and the server: get_tool_metrics on a
database a bench/scale.py run kept, and tools/list at several catalogue sizes (empty log).

    python bench/round_trip.py --db /tmp/i15tk/scale.db --tools 500 --catalogue 50,500,2000

Each figure is the median wall time of a call through the SDK's stdio client and the CPU per call of
the client and of the `toolwise serve` process (from /proc: on a shared machine wall time moves 2-3x
with the load, CPU much less); the reference is FeedbackService's own read of the same metrics, in
this process: from the database (the summaries just changed) and again while nothing changed (memory).
`--serve` runs another `toolwise serve` launcher (e.g. a script that imports an older
checkout) for a before/after on the same machine state.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters
from scale import BIN, caught_up, rss_mb, server_pid, sqlite_url, write_config

from toolwise.feedback import FeedbackService

CALLS = 21
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def per_call(pid: int, call: Callable[[], Awaitable[Any]]) -> tuple[float, float, float]:
    """Median wall ms of CALLS calls (after one warm-up), and client and server CPU ms per call."""
    await call()
    client, server, walls = time.process_time(), cpu_s(pid), []
    for _ in range(CALLS):
        begin = time.perf_counter()
        result = await call()
        walls.append((time.perf_counter() - begin) * 1000)
        if getattr(result, "is_error", False):
            raise RuntimeError(f"call failed: {result.content}")
    return (
        statistics.median(walls),
        (time.process_time() - client) * 1000 / CALLS,
        (cpu_s(pid) - server) * 1000 / CALLS,
    )


def params(serve: list[str], config: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=serve[0], args=[*serve[1:], "serve", "--config", str(config), "--log-level", "warning"]
    )


def line(figure: str, measured: tuple[float, float, float], extra: str = "") -> str:
    wall, client, server = measured
    return f"| {figure} | {wall:.1f} ms | {client:.1f} + {server:.1f} ms | {extra} |"


async def metrics(db: Path, tools: int, serve: list[str], work: Path) -> list[str]:
    async with FeedbackService(sqlite_url(db)) as feedback:
        await feedback.reports.get_tool_metrics()
        reads: dict[bool, list[float]] = {True: [], False: []}  # from the database (True) / from memory
        for _ in range(CALLS):
            for cold in (True, False):
                if cold and hasattr(feedback.log, "summaries_changed"):  # older versions read it every time
                    feedback.log.summaries_changed()
                begin = time.perf_counter()
                await feedback.reports.get_tool_metrics()
                reads[cold].append((time.perf_counter() - begin) * 1000)
    async with Client(params(serve, write_config(work / "metrics.json", db, tools)), read_timeout_seconds=900) as c:
        await caught_up(c)
        [tool] = [t for t in (await c.list_tools()).tools if t.name == "get_tool_metrics"]
        pid = server_pid()
        assert pid is not None
        reference = (
            f"FeedbackService read: {statistics.median(reads[True]):.1f} ms from the database, "
            f"{statistics.median(reads[False]):.2f} ms unchanged since"
        )
        rows = [
            line(
                f"get_tool_metrics, all {tools} tools",
                await per_call(pid, lambda: c.call_tool(tool.name, {})),
                reference,
            )
        ]
        if "limit" in tool.input_schema.get("properties", {}):  # not in older versions
            top = await per_call(pid, lambda: c.call_tool(tool.name, {"limit": 20}))
            rows.append(line("get_tool_metrics, limit 20", top))
    return rows


async def catalogue(size: int, serve: list[str], work: Path) -> str:
    db = work / f"catalogue-{size}.db"
    db.unlink(missing_ok=True)
    async with Client(params(serve, write_config(work / f"catalogue-{size}.json", db, size))) as c:
        listed = await c.list_tools()
        pid = server_pid()
        assert pid is not None
        measured = await per_call(pid, lambda: c.list_tools(cache_mode="refresh"))
        rss = rss_mb(pid)
    return line(f"tools/list, {len(listed.tools):,} tools", measured, f"server RSS {rss:.0f} MB")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="a database bench/scale.py kept (--keep); skipped if not given")
    parser.add_argument("--tools", type=int, default=500, help="tools of the downstream the database was filled for")
    parser.add_argument("--catalogue", default="50,500,2000", help="catalogue sizes for tools/list ('' skips)")
    parser.add_argument("--serve", default=str(BIN / "toolwise"), help="the command that runs `toolwise`")
    args = parser.parse_args()
    serve = [sys.executable, args.serve] if args.serve.endswith(".py") else [args.serve]
    rows = ["| figure | wall (median) | CPU per call: client + server | |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        if args.db is not None:
            rows += await metrics(args.db, args.tools, serve, Path(tmp))
        for size in [int(s) for s in args.catalogue.split(",") if s.strip()]:
            rows.append(await catalogue(size, serve, Path(tmp)))
    print(
        f"\nbench/round_trip.py ({CALLS} calls each, stdio, the SDK's client; load average {os.getloadavg()[0]:.1f})\n"
    )
    print("\n".join(rows))


if __name__ == "__main__":
    asyncio.run(main())
