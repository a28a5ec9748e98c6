"""What a recommendation waits for while learning is behind, reproducibly on a small machine.

    python bench/reads_behind.py [--backlog 2000] [--more 400] [--tools 1000] [--rounds 1] [--pause-ms 0]

toolwise in-process before `--tools` tools (bench/many_tools_server.py), no seed (calls pending are learned as
runs: up to 256 once that many wait); `--backlog` proxied calls held back (`holding_calls`), then learned while 4
callers make `--more` calls and a fifth asks recommend_tool over and over, until nothing is pending
(bench/overhead.py's in-process section measures the same with the callers alone making the backlog, which a
shared 2-core machine does not: learning keeps up there). Prints recommend_tool's round trip (ms); its wait in
`caught_up` (the staleness bound: a run learned first when no drain is on); of its read of the learned state, how
many found the lock held by the learning thread and how long they waited for it (from the read asked to the read
begun: the wait for the run being learned), the read's own time (wall, and CPU of the thread that did it); the
calls pending at each answer, and the calls learned a second meanwhile (wall clock and process CPU). Timed by
wrapping `LearningService.caught_up` and `LearningCore.read_learned`; run it with `PYTHONPATH=<other src>` for
the code before. A recommendation answered sooner is asked again sooner, and each costs CPU (the in-process client
and server, the read) that learning then does not get: `--pause-ms` makes the fifth caller wait that long between
two (`--pause-ms -1`: no recommendations, the learning rate alone).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
import many_tools_server
from overhead import block_of, timed

from toolwise.config import AppConfig, InProcessServer
from toolwise.learning.core import LearningCore
from toolwise.learning.service import LearningService
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

T = TypeVar("T")
CALLERS = 4


class Reads:
    """Each recommendation's read: asked, begun and done (perf_counter s), its CPU (s), whether the lock was held;
    and each wait in `caught_up` (ms)."""

    def __init__(self) -> None:
        self.rows: list[tuple[float, float, float, float, bool]] = []
        self.caught_up: list[float] = []

    def wrap(self) -> None:
        read_learned, caught_up = LearningCore.read_learned, LearningService.caught_up
        rows, waits = self.rows, self.caught_up

        async def timed_caught_up(service: LearningService, stale: int) -> None:
            begin = time.perf_counter()
            await caught_up(service, stale)
            waits.append((time.perf_counter() - begin) * 1000)

        async def timed_read(core: LearningCore, read: Callable[[Any], T], **how: Any) -> T:
            if not getattr(read, "__qualname__", "").endswith("decide"):  # a recommendation's (learning/agent.py)
                return await read_learned(core, read, **how)
            asked, box = time.perf_counter(), dict[str, Any]()

            def inner(learner: Any) -> T:
                box["begun"], cpu = time.perf_counter(), time.thread_time()
                try:
                    return read(learner)
                finally:
                    box["cpu"] = time.thread_time() - cpu
                    box["beside"] = threading.current_thread() is not threading.main_thread()

            answer = await read_learned(core, inner, **how)
            rows.append((asked, box["begun"], time.perf_counter(), box["cpu"], box["beside"]))
            return answer

        LearningCore.read_learned = timed_read  # type: ignore[method-assign, assignment]
        LearningService.caught_up = timed_caught_up  # type: ignore[method-assign, assignment]


async def one_round(backlog: int, more: int, tools: int, pause_ms: float, reads: Reads) -> dict[str, Any]:
    queries = [f"{v} {t} items" for v in many_tools_server.VERBS for t in many_tools_server.TOPICS]
    answered: list[float] = []
    pending: list[int] = []
    with tempfile.TemporaryDirectory() as folder:
        settings = {
            "database_url": f"sqlite+aiosqlite:///{folder}/r.db",
            "sync_interval_s": 0,
            "snapshot_interval_s": 0,
        }
        config = AppConfig.model_validate({"mcpServers": {}, "toolwise": settings})
        server = InProcessServer(many_tools_server.build(tools))
        async with Toolwise(config, in_process={"many": server}) as app, Client(build_server(app)) as client:
            names = [t.name for t in (await client.list_tools()).tools if t.name.startswith("many__")]
            learning = app.learning

            def proxied(i: int) -> Awaitable[float]:
                return timed(client, names[(i * 7919) % len(names)], i)

            while learning.loading or learning.catching_up:  # noqa: ASYNC110 - the start-up's own flags
                await asyncio.sleep(0.01)
            await block_of(proxied, 0, 100, CALLERS)
            await learning.drain()
            async with learning.holding_calls():  # noted, learned only once the block ends
                await block_of(proxied, 0, backlog, CALLERS)
            done = asyncio.Event()

            async def recommending() -> None:
                while pause_ms >= 0 and not done.is_set():
                    begin = time.perf_counter()
                    answer = await client.call_tool("recommend_tool", {"query": queries[len(answered) % len(queries)]})
                    if answer.is_error:
                        raise RuntimeError(f"recommend_tool failed: {answer.content}")
                    answered.append((time.perf_counter() - begin) * 1000)
                    pending.append(learning.pending)
                    await asyncio.sleep(pause_ms / 1000)

            async def calling() -> None:
                await block_of(proxied, backlog, more, CALLERS)
                while learning.pending:
                    await learning.drain()
                done.set()

            reads.rows.clear()
            reads.caught_up.clear()
            updates, wall, cpu = learning.learner.updates, time.perf_counter(), time.process_time()
            await asyncio.gather(recommending(), calling())
            learned = learning.learner.updates - updates
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rows = np.array(reads.rows).reshape(-1, 5)
    return {
        "answered": np.array(answered),
        "pending": np.array(pending),
        "wait": (rows[:, 1] - rows[:, 0]) * 1000,
        "own": (rows[:, 2] - rows[:, 1]) * 1000,
        "cpu": rows[:, 3] * 1000,
        "caught_up": np.array(reads.caught_up),
        "beside": rows[:, 4].astype(bool),
        "per_wall": learned / wall,
        "per_cpu": learned / cpu,
    }


def line(name: str, x: np.ndarray) -> str:
    if not len(x):
        return f"{name} none"
    p50, p90, p99 = np.percentile(x, [50, 90, 99])
    return f"{name} p50 {p50:6.2f}  p90 {p90:6.2f}  p99 {p99:6.2f}  max {x.max():6.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=2_000, help="proxied calls held back, then learned")
    parser.add_argument("--more", type=int, default=400, help="proxied calls made while the backlog is learned")
    parser.add_argument("--tools", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--pause-ms", type=float, default=0.0, help="between two recommendations; -1: none asked")
    args = parser.parse_args()
    reads = Reads()
    reads.wrap()
    for round_ in range(1, args.rounds + 1):
        seen = await one_round(args.backlog, args.more, args.tools, args.pause_ms, reads)
        held, pending = seen["beside"], np.median(seen["pending"]) if len(seen["pending"]) else 0
        print(
            f"round {round_}: {args.tools:,} tools, {args.backlog:,} calls held back then learned beside"
            f" {CALLERS} callers ({args.more:,} calls) and recommend_tool: {len(seen['answered'])} answered,"
            f" pending p50 {pending:.0f}; learned {seen['per_wall']:,.0f} calls/s of wall-clock,"
            f" {seen['per_cpu']:,.0f} of process CPU"
        )
        if not len(seen["answered"]):
            continue
        print(f"   {line('recommend_tool (ms)         ', seen['answered'])}")
        print(f"   {line('caught_up (ms)              ', seen['caught_up'])}")
        print(f"   {line('read: wait for the lock (ms)', seen['wait'])}")
        print(f"   {line('      of those that found it held', seen['wait'][held])}  ({held.mean():.0%} of reads)")
        print(f"   {line('read: own time, wall (ms)   ', seen['own'])}   CPU p50 {np.median(seen['cpu']):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
