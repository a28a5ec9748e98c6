"""What bench/overhead.py's blocks of back-to-back calls meet of learning, in-process: toolwise (seed 0, as
overhead.py runs it) before the in-process echo server, learning on and learning off, called in turn in blocks
of `--block` calls with a pause after each (the other paths' turns in overhead.py), as overhead.py interleaves
its paths.

    python bench/bursts.py [--blocks 10] [--block 40] [--pause 0.3] [--gap 0.0025]

Prints each path's call latency (median and p99, ms: in-process the client shares the loop, so the learning
thread's GIL is in every call's wall time) and the share of its calls during which a learning step ran (or began) on the
learning thread (`LearningService._learn`): the mechanism, which the machine's load barely moves. `--gap`: s
between two calls of a block, so that a block lasts about as long as over stdio (overhead.py's calls take ~3.6 ms
on the quiet 16-core machine, these ~1 ms). Run it with
`PYTHONPATH=<the code before>/src` for the code before.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import numpy as np
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from call_path import app

from toolwise.learning import service
from toolwise.learning.sessions import Call
from toolwise.server.build import build_server

steps = [0, 0]  # learning steps begun so far (one a call learned on its own), and whether one is running
_learn = service.LearningService._learn


def counted(self: service.LearningService, call: Call) -> None:
    steps[0] += 1
    steps[1] = 1
    try:
        _learn(self, call)
    finally:
        steps[1] = 0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--block", type=int, default=40, help="calls of a block (overhead.py's BLOCK)")
    parser.add_argument("--pause", type=float, default=0.3, help="s after each block (the other paths' turns)")
    parser.add_argument("--gap", type=float, default=0.0025, help="s between two calls of a block (stdio's pace)")
    args = parser.parse_args()
    service.LearningService._learn = counted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            clients: dict[str, Client] = {}
            for name, learning, db in (("learning on", True, "on"), ("learning off", False, "off")):
                toolwise = await stack.enter_async_context(app(Path(tmp), db, learning=learning, settings={"seed": 0}))
                clients[name] = await stack.enter_async_context(Client(build_server(toolwise)))
            latency: dict[str, list[float]] = {name: [] for name in clients}
            beside = dict.fromkeys(clients, 0)
            for client in clients.values():  # warm-up, as overhead.py's
                for i in range(50):
                    await client.call_tool("echo__echo", {"text": f"warm {i}"})
            await asyncio.sleep(args.pause)
            for _ in range(args.blocks):
                for name, client in clients.items():
                    for i in range(args.block):
                        before, running, begin = steps[0], steps[1], time.perf_counter()
                        await client.call_tool("echo__echo", {"text": f"hello {i}"})
                        latency[name].append((time.perf_counter() - begin) * 1000)
                        beside[name] += bool(running or steps[1] or steps[0] != before)
                        await asyncio.sleep(args.gap)
                    await asyncio.sleep(args.pause)
    print(
        f"{args.blocks} blocks of {args.block} in-process calls a path, {args.gap:g} s apart,"
        f" {args.pause:g} s after each"
    )
    for name, values in latency.items():
        x = np.array(values)
        print(
            f"   {name:<13} median {np.median(x):6.3f}  p99 {np.percentile(x, 99):7.3f} ms;"
            f"  calls beside a learning step {beside[name] / len(x):6.1%}"
        )


if __name__ == "__main__":
    asyncio.run(main())
