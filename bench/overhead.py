"""Latency a proxy adds to a trivial tool, alone and under concurrent callers, and what learning costs
the event loop.

    python bench/overhead.py [--calls 1000] [--rounds 3] [--concurrency 1,4,16] [--settings '{...}'] [--tracing]
    python bench/overhead.py --in-process [--calls 1000] [--tools 1000]    # the in-process figures alone

Over stdio, four paths to the same echo tool: (a) direct, (b) a bare pass-through proxy on the same SDK, (c)
toolwise at default settings (recording and learning; no seed, so the calls a drain finds waiting are learned
as runs; `--settings '{"seed": 0}'` learns each alone with its replays, as this script's toolwise did until
2026-11-28), (d) toolwise with `learning: false` (it still records), and with `--tracing` (e) toolwise with
OpenTelemetry tracing on (OTLP/HTTP to a stand-in collector that accepts everything; (c) is tracing off). The
clients stay open and are called in alternating blocks, so machine drift during the run weighs on each path
alike; at concurrency N each block runs N callers at once on the client's one connection. Prints median and
p99 per call, (c − a) / (b − a) (how toolwise's added latency compares with the bare proxy's; target ≤ 1.1 at
the median, ≤ 1.5 at p99) and p99(c) / p99(d) (what learning adds to the tail; target ≤ 1.3 with 4 callers),
per round and the median over rounds.

Then toolwise in-process (the echo server in-process too, the same `--settings`) with 4 callers, learning on
and off: the event loop's lag, measured by a task that asks to wake every millisecond (how late it woke: what
every call waiting on the loop waits too). One round on a shared 2-core machine moves by ±0.3 from run to run.
Last, the same lag while the learning thread learns a backlog of `--calls` calls (held back, then drained with
no caller; seed 0: each learned alone, the thread's turns between them), and that lag less the loop thread's
wait on the CPU's run queue over the same sleep (Linux's schedstat: what the machine's other work, not the GIL
or the loop's own work, cost it; on a shared machine the raw lag is mostly that), with the drain's calls/s of
wall-clock and of CPU time. Then what recommendations cost the other clients while learning is behind:
toolwise in-process before `--tools` tools, no seed (calls pending learned as runs), 4 callers making
`--calls` proxied calls in blocks, every other block with a fifth caller asking recommend_tool over and over
beside them: the proxied calls' p50/p99 and the loop's lag in the blocks without and with it (the reference,
same run), and recommend_tool's own latency. A read of the learned state waits for the lock beside the loop
(learning/worker.py); to see the code before, run this file with `PYTHONPATH=<its src>`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
ECHO = [str(HERE / "echo_server.py")]
TOOLWISE = ["-m", "toolwise", "serve"]  # as an installed client entry starts it (`install` writes the same)
QUIET = ["--log-level", "warning"]
BLOCK = 40  # calls of one path before the next path takes its turn
READ_BLOCK = 100  # proxied calls of a block with, then without, recommend_tool beside them (`reads_while_behind`)

Call = Callable[[int], Awaitable[float]]


async def timed(client: Client, tool: str, i: int) -> float:
    """One call's latency in ms (a failed call stops the run: it would measure the wrong thing)."""
    begin = time.perf_counter()
    result = await client.call_tool(tool, {"text": f"hello {i}"})
    elapsed = (time.perf_counter() - begin) * 1000
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return elapsed


async def block_of(call: Call, start: int, calls: int, callers: int) -> list[float]:
    """`calls` calls from `callers` concurrent callers, each calling one after another."""
    share = [range(start + c, start + calls, callers) for c in range(callers)]

    async def caller(indices: range) -> list[float]:
        return [await call(i) for i in indices]

    return [x for part in await asyncio.gather(*(caller(r) for r in share)) for x in part]


async def measure(targets: dict[str, Call], calls: int, callers: int) -> dict[str, np.ndarray]:
    """Latency per call (ms) of each target, measured in interleaved blocks after a warm-up."""
    latencies: dict[str, list[float]] = {name: [] for name in targets}
    for call in targets.values():
        await block_of(call, 0, 50, callers)
    order = list(targets.items())
    for start in range(0, calls, BLOCK):
        order = order[1:] + order[:1]  # each path takes each turn alike: none always follows another
        for name, call in order:
            latencies[name] += await block_of(call, start, min(BLOCK, calls - start), callers)
    return {name: np.array(values) for name, values in latencies.items()}


def p99(x: np.ndarray) -> float:
    return float(np.percentile(x, 99))


def report(runs: dict[str, np.ndarray], ratios: dict[str, list[float]]) -> None:
    for name, lat in runs.items():
        print(f"   {name:<26} median {np.median(lat):7.3f}   p99 {p99(lat):7.3f}")
    a, b, c, d = runs["a. direct"], runs["b. bare proxy"], runs["c. toolwise"], runs["d. toolwise, learning off"]
    if "e. toolwise, traced" in runs:
        traced = runs["e. toolwise, traced"]
        print(
            f"   tracing on adds {np.median(traced) - np.median(c):.3f} ms at the median to toolwise with tracing off"
        )
    for stat, f in (("median", lambda x: float(np.median(x))), ("p99", p99)):
        ratio = (f(c) - f(a)) / (f(b) - f(a))
        ratios[stat].append(ratio)
        print(f"   {stat}: toolwise adds {f(c) - f(a):.3f} ms, the bare proxy {f(b) - f(a):.3f} ms → ratio {ratio:.2f}")
    ratios["learning p99"].append(p99(c) / p99(d))
    print(f"   p99 learning on / off: {p99(c) / p99(d):.2f}")


def toolwise_config(tmp: Path, name: str, settings: dict[str, object]) -> Path:
    config = tmp / f"{name}.json"
    database = tmp / f"{name}.db"
    python = sys.executable
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"echo": {"command": python, "args": ECHO}},
                "toolwise": {"database_url": f"sqlite+aiosqlite:///{database}", **settings},
            }
        )
    )
    return config


async def one_round(
    calls: int, callers: int, settings: dict[str, object], *, tracing: bool = False
) -> tuple[dict[str, np.ndarray], int]:
    """One interleaved run of the paths in fresh processes, toolwise on fresh databases."""
    python = sys.executable
    with tempfile.TemporaryDirectory() as folder, collector() as endpoint:
        tmp = Path(folder)
        learning = toolwise_config(tmp, "learning", settings)
        recording = toolwise_config(tmp, "recording", {**settings, "learning": False})
        paths = {
            "a. direct": (StdioServerParameters(command=python, args=ECHO), "echo"),
            "b. bare proxy": (StdioServerParameters(command=python, args=[str(HERE / "bare_proxy.py"), *ECHO]), "echo"),
            "c. toolwise": (
                StdioServerParameters(command=python, args=[*TOOLWISE, "-c", str(learning), *QUIET]),
                "echo__echo",
            ),
            "d. toolwise, learning off": (
                StdioServerParameters(command=python, args=[*TOOLWISE, "-c", str(recording), *QUIET]),
                "echo__echo",
            ),
        }
        if tracing:
            traced = toolwise_config(tmp, "traced", settings)
            environment = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "bench"}
            paths["e. toolwise, traced"] = (
                StdioServerParameters(command=python, args=[*TOOLWISE, "-c", str(traced), *QUIET], env=environment),
                "echo__echo",
            )
        async with AsyncExitStack() as stack:
            targets: dict[str, Call] = {}
            for name, (params, tool) in paths.items():
                client = await stack.enter_async_context(Client(params))
                targets[name] = lambda i, c=client, t=tool: timed(c, t, i)  # type: ignore[misc]
            runs = await measure(targets, calls, callers)
        with sqlite3.connect(tmp / "learning.db") as conn:
            recorded = int(conn.execute("SELECT count(*) FROM executions").fetchone()[0])
    return runs, recorded


@contextmanager
def collector() -> Iterator[str]:
    """A stand-in OTLP/HTTP collector that accepts every export (and keeps nothing); its endpoint."""

    class Accept(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Accept)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()


async def loop_lag(
    calls: int, callers: int, learning: bool, settings: dict[str, object]
) -> tuple[np.ndarray, np.ndarray]:
    """toolwise in-process with `callers` concurrent callers: the lag of a task that asks to wake every
    millisecond (ms late) and the calls' latencies (ms)."""
    import echo_server  # bench/, on the path as a script's folder
    from loop_ticks import lateness

    from toolwise.config import AppConfig, InProcessServer
    from toolwise.server.app import Toolwise
    from toolwise.server.build import build_server

    with tempfile.TemporaryDirectory() as folder:
        config = AppConfig.model_validate(
            {
                "mcpServers": {},
                "toolwise": {"database_url": f"sqlite+aiosqlite:///{folder}/lag.db", **settings, "learning": learning},
            }
        )
        async with (
            Toolwise(config, in_process={"echo": InProcessServer(echo_server.build())}) as app,
            Client(build_server(app)) as client,
        ):
            await block_of(lambda i: timed(client, "echo__echo", i), 0, 50, callers)
            async with lateness() as lags:
                latencies = await block_of(lambda i: timed(client, "echo__echo", i), 0, calls, callers)
    return np.array(lags), np.array(latencies)


class RunQueue:
    """The ms the calling thread has waited on a CPU's run queue so far (Linux's schedstat; NaN elsewhere)."""

    def __init__(self) -> None:
        path = f"/proc/self/task/{threading.get_native_id()}/schedstat"
        self._fd = os.open(path, os.O_RDONLY) if os.path.exists(path) else None

    def waited(self) -> float:
        return float("nan") if self._fd is None else int(os.pread(self._fd, 128, 0).split()[1]) / 1e6


async def backlog_lag(calls: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    """toolwise in-process, `calls` calls held back then learned in one drain with no caller: the loop's lag
    (ms late for a 1 ms sleep), that lag less the run-queue wait meanwhile, and calls learned per second of
    wall-clock and of the process's CPU time."""
    import echo_server

    from toolwise.config import AppConfig, InProcessServer
    from toolwise.server.app import Toolwise
    from toolwise.server.build import build_server

    lags: list[float] = []
    own: list[float] = []
    queue = RunQueue()

    async def probe(stop: asyncio.Event) -> None:
        while not stop.is_set():
            begin, waited = time.perf_counter(), queue.waited()
            await asyncio.sleep(0.001)
            lags.append((time.perf_counter() - begin) * 1000 - 1.0)
            own.append(lags[-1] - (queue.waited() - waited))

    with tempfile.TemporaryDirectory() as folder:
        settings = {"database_url": f"sqlite+aiosqlite:///{folder}/lag.db", "seed": 0, "sync_interval_s": 0}
        config = AppConfig.model_validate({"mcpServers": {}, "toolwise": settings})
        async with (
            Toolwise(config, in_process={"echo": InProcessServer(echo_server.build())}) as app,
            Client(build_server(app)) as client,
        ):
            async with app.learning.holding_calls():  # noted, learned only once the block ends
                await block_of(lambda i: timed(client, "echo__echo", i), 0, calls, 1)
            stop = asyncio.Event()
            watching = asyncio.create_task(probe(stop))
            wall, cpu = time.perf_counter(), time.process_time()
            await app.learning.drain()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            stop.set()
            await watching
    return np.array(lags), np.array(own), calls / wall, calls / cpu


async def reads_while_behind(calls: int, tools: int) -> dict[str, list[float]]:
    """toolwise in-process before a downstream of `tools` tools, no seed (so learning falls behind and learns
    runs of calls), 4 callers making proxied calls in blocks of `READ_BLOCK`, every other block with a fifth
    caller asking recommend_tool over and over beside them (which block goes first alternates). Returns the
    proxied calls' latencies (ms) alone and beside the recommendations, the loop's lag (ms late for a 1 ms
    sleep) in each, recommend_tool's latencies (ms) and the calls pending each time the probe woke."""
    import many_tools_server

    from toolwise.config import AppConfig, InProcessServer
    from toolwise.server.app import Toolwise
    from toolwise.server.build import build_server

    queries = [f"{verb} {topic} items" for verb in many_tools_server.VERBS for topic in many_tools_server.TOPICS]
    seen: dict[str, list[float]] = {
        k: [] for k in ("alone", "beside", "lag alone", "lag beside", "recommend", "pending")
    }
    with tempfile.TemporaryDirectory() as folder:
        settings = {"database_url": f"sqlite+aiosqlite:///{folder}/reads.db", "sync_interval_s": 0}
        config = AppConfig.model_validate({"mcpServers": {}, "toolwise": {**settings, "snapshot_interval_s": 0}})
        server = InProcessServer(many_tools_server.build(tools))
        async with Toolwise(config, in_process={"many": server}) as app, Client(build_server(app)) as client:
            names = [t.name for t in (await client.list_tools()).tools if t.name.startswith("many__")]

            def proxied(i: int) -> Awaitable[float]:
                return timed(client, names[(i * 7919) % len(names)], i)

            async def probe(stop: asyncio.Event, lags: list[float]) -> None:
                while not stop.is_set():
                    begin = time.perf_counter()
                    await asyncio.sleep(0.001)
                    lags.append((time.perf_counter() - begin) * 1000 - 1.0)
                    seen["pending"].append(app.learning.pending)

            async def recommending(stop: asyncio.Event) -> None:
                while not stop.is_set():
                    begin = time.perf_counter()
                    answer = await client.call_tool(
                        "recommend_tool", {"query": queries[len(seen["recommend"]) % len(queries)]}
                    )
                    if answer.is_error:
                        raise RuntimeError(f"recommend_tool failed: {answer.content}")
                    seen["recommend"].append((time.perf_counter() - begin) * 1000)

            await block_of(proxied, 0, 100, 4)
            for start in range(0, calls, READ_BLOCK):
                for beside in (start // READ_BLOCK % 2 == 0, start // READ_BLOCK % 2 == 1):
                    stop = asyncio.Event()
                    tasks = [asyncio.create_task(probe(stop, seen["lag beside" if beside else "lag alone"]))]
                    if beside:
                        tasks.append(asyncio.create_task(recommending(stop)))
                    seen["beside" if beside else "alone"] += await block_of(proxied, start, READ_BLOCK, 4)
                    stop.set()
                    await asyncio.gather(*tasks)
    return seen


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000, help="calls per path, round and concurrency")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes and databases each round")
    parser.add_argument("--concurrency", default="1,4,16", help="concurrent callers, comma-separated")
    parser.add_argument("--tracing", action="store_true", help="also toolwise with tracing on (e)")
    parser.add_argument("--settings", default="{}", help='toolwise settings as JSON, e.g. \'{"policy": "semantic"}\'')
    parser.add_argument("--in-process", action="store_true", help="only the in-process figures (no stdio rounds)")
    parser.add_argument("--tools", type=int, default=1_000, help="the catalogue recommend_tool reads while behind")
    args = parser.parse_args()
    settings = json.loads(args.settings)
    for callers in (int(n) for n in args.concurrency.split(",") if not args.in_process):
        ratios: dict[str, list[float]] = {"median": [], "p99": [], "learning p99": []}
        for round_ in range(1, args.rounds + 1):
            runs, recorded = await one_round(args.calls, callers, settings, tracing=args.tracing)
            print(f"{callers} caller(s), round {round_}: {args.calls:,} calls of an echo tool over stdio (ms per call)")
            report(runs, ratios)
            print(f"   toolwise recorded {recorded:,} executions (warm-up included)")
        for stat, values in ratios.items():
            shown = ", ".join(f"{v:.2f}" for v in values)
            print(f"{callers} caller(s): {stat} ratio over {args.rounds} rounds: {np.median(values):.2f} ({shown})")
    print("toolwise in-process, 4 callers: event-loop lag (ms late for a 1 ms sleep) and call latency (ms)")
    for learning in (True, False):
        lag, latency = await loop_lag(args.calls, 4, learning, settings)
        print(
            f"   learning {'on ' if learning else 'off'}  lag p50 {np.median(lag):6.3f}  p99 {p99(lag):6.3f}"
            f"  max {lag.max():6.3f}   calls p50 {np.median(latency):6.3f}  p99 {p99(latency):6.3f}"
        )
    lag, own, per_wall, per_cpu = await backlog_lag(args.calls)
    print(
        f"toolwise in-process, {args.calls:,} calls held back then learned: lag p50 {np.median(lag):6.3f}"
        f"  p99 {p99(lag):6.3f}  max {lag.max():6.3f}; less the run-queue wait: p50 {np.median(own):6.3f}"
        f"  p99 {p99(own):6.3f}  max {own.max():6.3f}; learned {per_wall:,.0f} calls/s of wall-clock,"
        f" {per_cpu:,.0f} of CPU time"
    )
    seen = await reads_while_behind(args.calls, args.tools)
    pending = np.array(seen["pending"])
    print(
        f"toolwise in-process, {args.tools:,} tools, no seed, 4 callers, recommend_tool asked beside them in every"
        f" other block: calls pending p50 {np.median(pending):.0f}, p99 {p99(pending):.0f}"
        " (learned as runs: in minibatches of 2 below 16 waiting)"
    )
    for block in ("alone", "beside"):
        calls, lag = np.array(seen[block]), np.array(seen[f"lag {block}"])
        print(
            f"   proxied calls {block:6s}  p50 {np.median(calls):6.3f}  p99 {p99(calls):6.3f}"
            f"   lag p50 {np.median(lag):6.3f}  p99 {p99(lag):6.3f}  max {lag.max():6.3f}"
        )
    asked = np.array(seen["recommend"])
    print(f"   recommend_tool: {len(asked):,} answered, p50 {np.median(asked):6.3f}  p99 {p99(asked):6.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
