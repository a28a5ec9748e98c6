"""Latency a proxy adds to a trivial tool: (a) direct, (b) a bare pass-through proxy on the same SDK,
(c) toolwise with recording and learning on, and with `--tracing` (d) the same with OpenTelemetry
tracing on (OTLP/HTTP to a stand-in collector that accepts everything): (c) is tracing off. All over
stdio; the clients stay open and are called in alternating blocks, so machine drift during the run
weighs on each path alike.

    python bench/overhead.py [--calls 1000] [--rounds 3] [--settings '{"flush_interval_ms": 100}'] [--tracing]

toolwise runs through its console script at default settings, in blocks of 20 calls. Prints median
and p99 per call, and (c − a) / (b − a): how toolwise's added latency compares with the bare proxy's
(target ≤ 1.1), per round and the median over rounds (one round on a shared 2-core machine moves
by ±0.3 from run to run).
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
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters

HERE = Path(__file__).resolve().parent
ECHO = [str(HERE / "echo_server.py")]


async def measure(
    targets: dict[str, tuple[StdioServerParameters, str]], calls: int, block: int = 20
) -> dict[str, np.ndarray]:
    """Latency per call (ms) of each target, measured in interleaved blocks after a warm-up."""
    async with AsyncExitStack() as stack:
        clients = {
            name: (await stack.enter_async_context(Client(params)), tool) for name, (params, tool) in targets.items()
        }
        latencies: dict[str, list[float]] = {name: [] for name in targets}
        for client, tool in clients.values():
            for i in range(50):
                await client.call_tool(tool, {"text": f"warm {i}"})
        order = list(clients.items())
        for start in range(0, calls, block):
            order = order[1:] + order[:1]  # each path takes each turn alike: none always follows another
            for name, (client, tool) in order:
                for i in range(start, min(start + block, calls)):
                    begin = time.perf_counter()
                    result = await client.call_tool(tool, {"text": f"hello {i}"})
                    latencies[name].append((time.perf_counter() - begin) * 1000)
                    if result.is_error:
                        raise RuntimeError(f"{name}: {tool} failed: {result.content}")
    return {name: np.array(values) for name, values in latencies.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes and database each round")
    parser.add_argument(
        "--settings", default="{}", help="toolwise settings as JSON, e.g. '{\"flush_interval_ms\": 100}'"
    )
    parser.add_argument("--tracing", action="store_true", help="also toolwise with tracing on (d)")
    args = parser.parse_args()
    ratios: dict[str, list[float]] = {"median": [], "p99": []}
    for round_ in range(1, args.rounds + 1):
        runs, recorded = await one_round(args.calls, json.loads(args.settings), tracing=args.tracing)
        print(f"round {round_}: {args.calls:,} calls of a trivial echo tool over stdio (ms per call)")
        for name, lat in runs.items():
            print(f"   {name:<20} median {np.median(lat):7.3f}   p99 {np.percentile(lat, 99):7.3f}")
        a, b, c = runs["a. direct"], runs["b. bare proxy"], runs["c. toolwise"]
        if "d. toolwise traced" in runs:
            d = runs["d. toolwise traced"]
            print(f"   tracing on adds {np.median(d) - np.median(c):.3f} ms at the median to toolwise with tracing off")
        for stat, f in (("median", np.median), ("p99", lambda x: np.percentile(x, 99))):
            ratio = (f(c) - f(a)) / (f(b) - f(a))
            ratios[stat].append(ratio)
            print(
                f"   {stat}: toolwise adds {f(c) - f(a):.3f} ms, the bare proxy {f(b) - f(a):.3f} ms"
                f" → ratio {ratio:.2f}"
            )
        print(f"   toolwise recorded {recorded:,} executions (warm-up included)")
    for stat, values in ratios.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"{stat} ratio over {args.rounds} rounds: {np.median(values):.2f} (rounds: {shown}; target ≤ 1.1)")


async def one_round(
    calls: int, settings: dict[str, object], *, tracing: bool = False
) -> tuple[dict[str, np.ndarray], int]:
    """One interleaved run of the paths in fresh processes, toolwise on a fresh database (each its own)."""
    python = sys.executable
    console = str(Path(python).parent / "toolwise")  # the console script, as users start it
    with tempfile.TemporaryDirectory() as tmp, collector() as endpoint:
        db = Path(tmp) / "bench.db"

        def serve(name: str, env: dict[str, str] | None = None) -> StdioServerParameters:
            config = Path(tmp) / f"{name}.json"
            database = db if env is None else Path(tmp) / f"{name}.db"
            config.write_text(
                json.dumps(
                    {
                        "mcpServers": {"echo": {"command": python, "args": ECHO}},
                        "toolwise": {"database_url": f"sqlite+aiosqlite:///{database}", "seed": 0, **settings},
                    }
                )
            )
            return StdioServerParameters(
                command=console, args=["serve", "-c", str(config), "--log-level", "warning"], env=env
            )

        targets = {
            "a. direct": (StdioServerParameters(command=python, args=ECHO), "echo"),
            "b. bare proxy": (
                StdioServerParameters(command=python, args=[str(HERE / "bare_proxy.py"), *ECHO]),
                "echo",
            ),
            "c. toolwise": (serve("off"), "echo__echo"),  # the SDK client's default environment: no OTEL_*
        }
        if tracing:
            traced = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_SERVICE_NAME": "toolwise-bench"}
            targets["d. toolwise traced"] = (serve("traced", traced), "echo__echo")
        runs = await measure(targets, calls)
        with sqlite3.connect(db) as conn:
            recorded = conn.execute("SELECT count(*) FROM executions").fetchone()[0]
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


if __name__ == "__main__":
    asyncio.run(main())
