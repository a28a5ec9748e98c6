"""What OpenTelemetry tracing costs a proxied call, in-process (no pipes or scheduling between the
paths, so differences of microseconds show): toolwise in front of an in-process echo server, driven by
`mcp.Client(server)` in interleaved blocks, as

    (a) tracing off: no span middleware, no CLIENT span (what `toolwise serve` runs without OTEL_*),
    (b) the SDK's own span middleware in its place, with no SDK configured (what ran before tracing),
    (c) tracing on: toolwise's SERVER and CLIENT spans and histograms, to an in-memory exporter.

    python bench/tracing.py [--calls 5000] [--rounds 3]

Prints the median and p99 per call (µs) and each path's difference to (a), per round.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from mcp.server import Server
from mcp.server._otel import OpenTelemetryMiddleware
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent))
import echo_server  # the bench's downstream, here in-process

from toolwise.config import AppConfig, InProcessServer
from toolwise.downstream.tracing import Tracing
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server


def echo() -> Server[Any]:
    return Server("echo", version="1", on_list_tools=echo_server.list_tools, on_call_tool=echo_server.call_tool)


def app(tmp: Path, name: str, tracing: Tracing | None) -> Toolwise:
    config = AppConfig.model_validate(
        {
            "mcpServers": {},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp / name}.db", "seed": 0, "sync_interval_s": 0},
        }
    )
    return Toolwise(config, in_process={"echo": InProcessServer(echo())}, tracing=tracing)


async def one_round(calls: int, block: int = 50) -> dict[str, np.ndarray]:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    tracing = Tracing.of(provider, MeterProvider(metric_readers=[InMemoryMetricReader()]))
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            off = await stack.enter_async_context(app(Path(tmp), "off", None))
            on = await stack.enter_async_context(app(Path(tmp), "on", tracing))
            sdk_spans = build_server(off)
            sdk_spans.middleware = [OpenTelemetryMiddleware()]  # as the SDK serves by default
            servers = {
                "a. tracing off": build_server(off),
                "b. SDK's middleware": sdk_spans,
                "c. tracing on": build_server(on),
            }
            clients = {name: await stack.enter_async_context(Client(server)) for name, server in servers.items()}
            latencies: dict[str, list[float]] = {name: [] for name in clients}
            for client in clients.values():
                for i in range(100):
                    await client.call_tool("echo__echo", {"text": f"warm {i}"})
            order = list(clients.items())
            for start in range(0, calls, block):
                order = order[1:] + order[:1]
                for name, client in order:
                    for i in range(start, min(start + block, calls)):
                        begin = time.perf_counter()
                        await client.call_tool("echo__echo", {"text": f"hello {i}"})
                        latencies[name].append((time.perf_counter() - begin) * 1e6)
                exported.clear()  # keeps memory flat; the spans were made and exported all the same
    return {name: np.array(values) for name, values in latencies.items()}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for round_ in range(1, args.rounds + 1):
        runs = await one_round(args.calls)
        base = runs["a. tracing off"]
        print(f"round {round_}: {args.calls:,} in-process calls of an echo tool through toolwise (µs per call)")
        for name, lat in runs.items():
            print(
                f"   {name:<20} median {np.median(lat):7.1f}   p99 {np.percentile(lat, 99):7.1f}"
                f"   median − (a) {np.median(lat) - np.median(base):+6.1f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
