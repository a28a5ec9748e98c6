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

    python bench/startup.py --cli [--runs 7] [--before DIR]

The command line's own start, on the README's example config (no database needed): the CPU seconds
(user + system, the process and the children it waited for) of `toolwise --version`, `toolwise --help`
and `toolwise doctor`, and for `toolwise serve` the time from its spawn to its answer to `initialize`,
toolwise's own CPU at that answer, and the CPU of the whole serve (its downstreams and the shutdown
snapshot included) once the client closes stdin. With `--before DIR` (here a whole `src` folder, e.g.
`git archive main | tar -x -C DIR/..`) each round also runs that code, alternating which goes first.

    python bench/startup.py --in-process [--tools 1000] [--runs 3]

An in-process start without a seed over a fresh database (bench/many_tools_server.py's `--tools` in-process):
the event loop's longest stall (a 1 ms timer's lateness, bench/loop_ticks.py) while the app starts (until it
serves: the downstream's routes, the catalogue) and from then until its catalogue is embedded, and the seconds
until the app serves (entered) and until the first recommend_tool answers. To see the code before, run it
with `PYTHONPATH=<its src>`.
"""

from __future__ import annotations

import argparse
import asyncio
import compileall
import json
import os
import resource
import statistics
import subprocess
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


EXAMPLE = HERE.parent / "toolwise.example.json"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench-startup", "version": "0"},
    },
}


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's children that were waited for, so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def command_cpu(args: list[str], env: dict[str, str]) -> float:
    """CPU seconds of one `toolwise ARGS` run (it must succeed), its waited-for children included."""
    before = children_cpu()
    done = subprocess.run([str(BIN / "toolwise"), *args], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"toolwise {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return children_cpu() - before


def own_cpu(pid: int) -> float:
    """CPU seconds one live process has used (Linux: /proc/PID/stat's utime + stime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def serve_figures(env: dict[str, str], database: Path) -> dict[str, float]:
    """`toolwise serve` on the example config over raw stdio: seconds to the `initialize` answer,
    toolwise's own CPU at that moment, and the CPU of the whole run (downstreams, shutdown) after stdin closes."""
    before = children_cpu()
    args = [
        "serve",
        "--config",
        str(EXAMPLE),
        "--log-level",
        "warning",
        "--database-url",
        f"sqlite+aiosqlite:///{database}",
    ]
    begin = time.perf_counter()
    with subprocess.Popen(
        [str(BIN / "toolwise"), *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as process:
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps(INITIALIZE) + "\n")
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        seconds = time.perf_counter() - begin
        cpu_at_answer = own_cpu(process.pid)
        if "result" not in answer:
            raise RuntimeError(f"initialize failed: {answer}")
        process.stdin.close()
        if process.wait(timeout=60) != 0:
            raise RuntimeError(f"toolwise serve exited {process.returncode}")
    return {
        "serve: initialize answered (s)": seconds,
        "serve: its CPU then": cpu_at_answer,
        "serve: CPU in all": children_cpu() - before,
    }


def cli_figures(runs: int, before: Path | None) -> None:
    """`--cli`: the command line's start-up figures, this code and (with `before`) older code by turns."""
    codes = {"this code": str(HERE.parent / "src")}
    if before is not None:
        codes["before"] = str(before.resolve())
    for code in codes.values():  # neither compiles its modules at each start (PYTHONDONTWRITEBYTECODE writes none)
        compileall.compile_dir(code, quiet=1)
    results: dict[str, dict[str, list[float]]] = {name: {} for name in codes}
    print(f"load average before: {os.getloadavg()}", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            names = list(codes)
            names = names[run % len(names) :] + names[: run % len(names)]  # each first in turn
            for name in names:
                env = {**os.environ, "PYTHONPATH": codes[name], "XDG_DATA_HOME": tmp, "HOME": tmp}
                database = Path(tmp) / f"{name}-{run}.db"
                figures = {
                    "--version: CPU": command_cpu(["--version"], env),
                    "--help: CPU": command_cpu(["--help"], env),
                    "doctor: CPU": command_cpu(
                        ["doctor", "--config", str(EXAMPLE), "--database-url", f"sqlite+aiosqlite:///{database}"], env
                    ),
                    **serve_figures(env, database),
                }
                for figure, value in figures.items():
                    results[name].setdefault(figure, []).append(value)
                shown = ", ".join(f"{k} {v:.2f}" for k, v in figures.items())
                print(f"  run {run + 1} {name}: {shown}", file=sys.stderr, flush=True)
    print(f"load average after: {os.getloadavg()}", file=sys.stderr, flush=True)
    for figure in results["this code"]:
        shown = "; ".join(f"{name} {summary(values[figure])}" for name, values in results.items())
        print(f"{figure}: {shown} (median, min–max of {runs})")


async def in_process_start(tools: int, database: Path) -> dict[str, float]:
    """`--in-process`: one start's longest loop stall (ms) and seconds to serving and to recommend_tool."""
    import many_tools_server
    from loop_ticks import lateness

    from toolwise.config import AppConfig, InProcessServer
    from toolwise.server.app import Toolwise
    from toolwise.server.build import build_server

    url = f"sqlite+aiosqlite:///{database}"
    config = AppConfig.model_validate({"mcpServers": {}, "toolwise": {"database_url": url, "sync_interval_s": 0}})
    downstream = InProcessServer(many_tools_server.build(tools))
    async with lateness() as late:
        await asyncio.sleep(0.02)
        begin = time.perf_counter()
        async with Toolwise(config, in_process={"many": downstream}) as app:
            entered, starting = time.perf_counter() - begin, len(late)
            async with Client(build_server(app)) as client:
                result = await client.call_tool("recommend_tool", {"query": "read the file items"})
                if result.is_error:
                    raise RuntimeError(f"recommend_tool failed: {result.content}")
                recommended = time.perf_counter() - begin
            await app.learning.catalogue_taken()
            await asyncio.sleep(0.01)  # the tick that was late when it was taken
            start, serving = max(late[: starting + 1], default=0.0), max(late[starting + 1 :], default=0.0)
    return {
        "longest stall starting (ms)": start,
        "then until embedded (ms)": serving,
        "serving (s)": entered,
        "recommend_tool answered (s)": recommended,
    }


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, help="an SQLite toolwise database holding a snapshot")
    parser.add_argument("--cli", action="store_true", help="the command line's start instead (no --db)")
    parser.add_argument("--tools", type=int, default=500, help="tools of the downstream")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="an older checkout's toolwise/ folders, run in each round too")
    parser.add_argument("--in-process", action="store_true", help="an in-process start's loop stall instead")
    args = parser.parse_args()
    if args.cli:
        cli_figures(args.runs, args.before)
        return
    if args.in_process:
        print(f"load average before: {os.getloadavg()}", flush=True)
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(args.runs):
                start = await in_process_start(args.tools, Path(tmp) / f"start-{run}.db")
                print(f"  run {run + 1}: " + ", ".join(f"{k} {v:,.2f}" for k, v in start.items()), flush=True)
        print(f"load average after: {os.getloadavg()}", flush=True)
        return
    if args.db is None:
        parser.error("--db is required (or --cli)")
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
