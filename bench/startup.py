"""Start-up with a snapshot: how long from launching `toolwise serve` until the first tools/list answers,
next to a bare proxy (interpreter, the SDK, the same downstream, nothing else) started the same way.

    python bench/startup.py --db /tmp/x/scale.db [--tools 500] [--runs 7] [--before DIR]

Launches each server `--runs` times through the SDK's stdio client, alternating toolwise and the
reference (bench/bare_proxy.py over the same downstream; each first in a round in turn), and prints the
median (min–max) time to the answered `initialize`, the first tools/list and, for toolwise, the first
recommend_tool and the moment `get_learning_stats` no longer says "catching up". The database must hold
a snapshot (a `bench/scale.py --keep` run leaves one). Load average is printed before and after: the
machine is shared. `--before DIR` adds an older toolwise to each round, its folders shadowing the
installed ones (DIR made with `mkdir -p DIR/toolwise && git archive COMMIT server rl feedback | tar -x
-C DIR/toolwise`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from scale import BIN, HERE, snapshots, write_config


async def first_answers(server: StdioServerParameters, toolwise: bool) -> dict[str, float]:
    """Seconds from launch to each first answer (`initialize`, tools/list; for toolwise also
    recommend_tool and the learned state serving)."""
    begin = time.perf_counter()
    times: dict[str, float] = {}
    async with Client(server, read_timeout_seconds=120) as client:
        times["initialize"] = time.perf_counter() - begin
        await client.list_tools()
        times["tools/list"] = time.perf_counter() - begin
        if toolwise:
            result = await client.call_tool("recommend_tool", {"query": "read the file items"})
            if result.is_error:
                raise RuntimeError(f"recommend_tool failed: {result.content}")
            times["recommend_tool"] = time.perf_counter() - begin
            while True:
                stats = await client.call_tool("get_learning_stats", {})
                if "catching up" not in (stats.structured_content or {}).get("serving", ""):
                    break
                await asyncio.sleep(0.05)
            times["learned state serving"] = time.perf_counter() - begin
    return times


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="an SQLite toolwise database holding a snapshot")
    parser.add_argument("--tools", type=int, default=500, help="tools of the downstream")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="an older checkout's toolwise/ folders, run in each round too")
    args = parser.parse_args()
    if not snapshots(args.db):
        raise SystemExit(f"{args.db} holds no snapshot: start toolwise on it once (its shutdown stores one)")
    downstream = [str(HERE / "many_tools_server.py"), str(args.tools)]
    bare = StdioServerParameters(command=sys.executable, args=[str(HERE / "bare_proxy.py"), *downstream])
    results: dict[str, dict[str, list[float]]] = {"toolwise": {}, "bare proxy (reference)": {}}
    print(f"load average before: {os.getloadavg()}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        config = write_config(Path(tmp) / "toolwise.json", args.db, args.tools)
        serve = ["serve", "--config", str(config), "--log-level", "warning"]
        servers = [
            ("toolwise", StdioServerParameters(command=str(BIN / "toolwise"), args=serve), True),
            ("bare proxy (reference)", bare, False),
        ]
        if args.before is not None:
            env = {"PYTHONPATH": str(args.before.resolve())}
            older = StdioServerParameters(command=str(BIN / "toolwise"), args=serve, env=env)
            servers.insert(1, ("toolwise before", older, True))
            results["toolwise before"] = {}
        for run in range(args.runs):
            shift = run % len(servers)  # each goes first in turn: a server starts slower right after another's exit
            for name, server, toolwise in servers[shift:] + servers[:shift]:
                times = await first_answers(server, toolwise)
                for figure, seconds in times.items():
                    results[name].setdefault(figure, []).append(seconds)
                shown = ", ".join(f"{k} {v:.2f} s" for k, v in times.items())
                print(f"  run {run + 1} {name}: {shown}", file=sys.stderr, flush=True)
    print(f"load average after: {os.getloadavg()}", file=sys.stderr, flush=True)
    for name, figures in results.items():
        for figure, values in figures.items():
            print(f"{name}: first {figure}: {summary(values)} (median, min–max of {len(values)})")
    ratio = statistics.median(results["toolwise"]["tools/list"]) / statistics.median(
        results["bare proxy (reference)"]["tools/list"]
    )
    print(f"toolwise / bare proxy, first tools/list: {ratio:.2f}×")


if __name__ == "__main__":
    asyncio.run(main())
