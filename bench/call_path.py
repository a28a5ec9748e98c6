"""CPU time toolwise spends on its own per proxied call, in-process: the event loop's share of the
overhead bench/overhead.py measures over stdio, without the pipes' and the scheduler's noise. Each
path is driven by `mcp.Client(server)` in interleaved blocks against the same in-process echo server:

    (a) the bare SDK proxy (bench/bare_proxy.py's handlers: forward tools/call, nothing else),
    (b) toolwise with `learning: false` (calls recorded, nothing learned),
    (c) toolwise with learning on (the default).

    python bench/call_path.py [--calls 3000] [--rounds 3] [--settings '{"seed": 0}']

Prints CPU µs per call (`time.process_time` over each block of 100 calls and the drain that records
and learns them: every thread of the process, the store's writer and the learner included) and wall µs
per call, the median over the blocks (other processes' bursts hit a few blocks), and each path's excess
over (a). Then, after the timed blocks, the Python and C functions the event loop's thread calls per call
over one more block, its drain and its records' commit (`sys.setprofile`, that thread only; the other
paths' deferred work done before): a count that the machine's load barely moves, where the timings on a
shared machine move by tens of µs. In-process a client has no
connection channel, so each call is a session of its own (a stdio client's calls share its
connection's): the per-call session work differs a little from stdio's.
`--settings` as bench/overhead.py's: with its `seed` (overhead.py's own toolwise runs with `"seed": 0`)
every call is learned one at a time with its replays, never as a run of calls behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import echo_server  # the bench's downstream, here in-process
from bare_proxy import proxy  # bench/bare_proxy.py's handlers, over an in-process client

from toolwise.config import AppConfig, InProcessServer
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server


def app(tmp: Path, name: str, *, learning: bool, settings: dict[str, object]) -> Toolwise:
    config = AppConfig.model_validate(
        {
            "mcpServers": {},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp / name}.db", **settings, "learning": learning},
        }
    )
    return Toolwise(config, in_process={"echo": InProcessServer(echo_server.build())})


def caller(client: Client, tool: str) -> Callable[[int], Awaitable[Any]]:
    return lambda i: client.call_tool(tool, {"text": f"hello {i}"})


async def counted(
    call: Callable[[int], Awaitable[Any]], toolwise: Toolwise | None, apps: list[Toolwise], block: int
) -> tuple[float, float]:
    """Python and C function calls on this (the event loop's) thread per call, over a block, its drain and
    its records' commit; every app's deferred work done first (they share the loop)."""
    for settled in apps:
        await settled.learning.drain()
        await settled.feedback.flush()
    seen = {"call": 0, "c_call": 0}

    def count(frame: FrameType, event: str, arg: object) -> None:
        if event in seen:
            seen[event] += 1

    sys.setprofile(count)
    try:
        for i in range(block):
            await call(i)
        if toolwise is not None:
            await toolwise.learning.drain()
            await toolwise.feedback.flush()
    finally:
        sys.setprofile(None)
    return seen["call"] / block, seen["c_call"] / block


async def one_round(
    calls: int, settings: dict[str, object], block: int = 100
) -> dict[str, tuple[float, float, float, float]]:
    """(CPU µs, wall µs) per call for each path, the median over blocks; then (Python, C) function calls
    on the loop's thread per call."""
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            down = await stack.enter_async_context(Client(echo_server.build()))
            off = await stack.enter_async_context(app(Path(tmp), "off", learning=False, settings=settings))
            on = await stack.enter_async_context(app(Path(tmp), "on", learning=True, settings=settings))
            drains = {"b. toolwise, learning off": off, "c. toolwise, learning on": on}
            paths: dict[str, tuple[Client, str]] = {
                "a. bare SDK proxy": (await stack.enter_async_context(Client(proxy(down))), "echo"),
                "b. toolwise, learning off": (await stack.enter_async_context(Client(build_server(off))), "echo__echo"),
                "c. toolwise, learning on": (await stack.enter_async_context(Client(build_server(on))), "echo__echo"),
            }
            calls_of = {name: caller(client, tool) for name, (client, tool) in paths.items()}
            for call in calls_of.values():
                for i in range(200):
                    await call(i)
            cpu: dict[str, list[float]] = {name: [] for name in paths}
            wall: dict[str, list[float]] = {name: [] for name in paths}
            order = list(calls_of.items())
            for start in range(0, calls, block):
                order = order[1:] + order[:1]
                for name, call in order:
                    cpu0, wall0 = time.process_time(), time.perf_counter()
                    for i in range(start, start + block):
                        await call(i)
                    if name in drains:  # what the calls left to record and learn is theirs too
                        await drains[name].learning.drain()
                    cpu[name].append((time.process_time() - cpu0) / block * 1e6)
                    wall[name].append((time.perf_counter() - wall0) / block * 1e6)
            apps = [off, on]
            functions = {name: await counted(call, drains.get(name), apps, block) for name, call in calls_of.items()}
    return {name: (float(np.median(cpu[name])), float(np.median(wall[name])), *functions[name]) for name in paths}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--settings", default="{}", help="toolwise settings as JSON, e.g. '{\"seed\": 0}'")
    args = parser.parse_args()
    settings = json.loads(args.settings)
    for round_ in range(1, args.rounds + 1):
        runs = await one_round(args.calls, settings)
        base_cpu, base_wall, base_py, base_c = runs["a. bare SDK proxy"]
        print(f"round {round_}: {args.calls:,} in-process calls of an echo tool per path (µs per call)")
        for name, (cpu, wall, _, _) in runs.items():
            print(
                f"   {name:<27} CPU {cpu:6.1f} (excess over a {cpu - base_cpu:+6.1f}, ×{cpu / base_cpu:4.2f})"
                f"   wall {wall:6.1f} ({wall - base_wall:+6.1f})"
            )
        print("   functions the event loop's thread calls per call (one block and its drain): Python, C")
        for name, (_, _, python, c) in runs.items():
            print(f"   {name:<27} {python:6.1f} ({python - base_py:+6.1f})   {c:6.1f} ({c - base_c:+6.1f})")


if __name__ == "__main__":
    asyncio.run(main())
