"""What stalls the event loop while toolwise serves: `bench/overhead.py`'s in-process figures, run with the
cyclic garbage collector and the loop watched (issue 35's ~110 ms stalls were full collections).

    python bench/stalls.py --in-process [--calls 1000]    # overhead.py's arguments, passed on

Prints overhead.py's figures, then: each generation-2 collection (wall and CPU ms, on which thread, whether
an app was serving: entered and not yet closing), the loop's own lag while serving (how late a 2 ms sleep
woke less the loop thread's wait on the CPU's run queue meanwhile, Linux's schedstat: what the process did
to itself, the GIL, a collection or work on the loop, not the machine's load), each own lag over 50 ms with
the collections it overlapped, and recommend_tool's wait parts (`LearningService.caught_up`, the read of the
learned state). To see the code before, run it with `PYTHONPATH=<its src>`.
"""

from __future__ import annotations

import asyncio
import gc
import os
import runpy
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from toolwise.learning.service import LearningService
from toolwise.learning.worker import LearningThread
from toolwise.server.app import Toolwise

T = TypeVar("T")
OVERHEAD = Path(__file__).resolve().parent / "overhead.py"
TICK_S = 0.002


@dataclass
class Watched:
    serving: bool = False
    collections: list[tuple[float, float, float, str, bool]] = field(default_factory=list)  # start, ms, CPU ms
    own: list[tuple[float, float]] = field(default_factory=list)  # (when, ms) while serving
    waits: dict[str, list[float]] = field(default_factory=lambda: {"caught_up": [], "read": []})
    _began: tuple[float, float, str] = (0.0, 0.0, "")

    def collected(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = (time.perf_counter(), time.thread_time(), threading.current_thread().name)
            return
        start, cpu, thread = self._began
        wall, cpu = (time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000
        self.collections.append((start, wall, cpu, thread, self.serving))


WATCHED = Watched()


def timed(cls: type, name: str, key: str) -> None:
    """`cls.name`, an async method, with its wall time appended to `WATCHED.waits[key]`."""
    original: Callable[..., Awaitable[Any]] = getattr(cls, name)

    async def timing(self: object, *args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        try:
            return await original(self, *args, **kwargs)
        finally:
            WATCHED.waits[key].append((time.perf_counter() - begin) * 1000)

    setattr(cls, name, timing)


def serving_marked() -> None:
    """`WATCHED.serving` from the end of an app's start to the start of its close."""
    enter, leave = Toolwise.__aenter__, Toolwise.__aexit__

    async def entered(self: Toolwise) -> Toolwise:
        app = await enter(self)
        WATCHED.serving = True
        return app

    async def leaving(self: Toolwise, *exc: object) -> None:
        WATCHED.serving = False
        await leave(self, *exc)

    Toolwise.__aenter__ = entered  # type: ignore[method-assign]  # a bench's probe, not the app's code
    Toolwise.__aexit__ = leaving  # type: ignore[method-assign]


async def own_lag(stop: asyncio.Event) -> None:
    """Append the loop's own lag (ms) to `WATCHED.own` every `TICK_S` while an app serves."""
    fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
    try:
        while not stop.is_set():
            queued, begin = int(os.pread(fd, 128, 0).split()[1]), time.perf_counter()
            await asyncio.sleep(TICK_S)
            late = (time.perf_counter() - begin - TICK_S) * 1000 - (int(os.pread(fd, 128, 0).split()[1]) - queued) / 1e6
            if WATCHED.serving:
                WATCHED.own.append((begin, late))
    finally:
        os.close(fd)


def watched_run(run: Callable[..., T]) -> Callable[..., T]:
    """`asyncio.run` with `own_lag` watching beside the coroutine."""

    def running(main: Coroutine[Any, Any, T], **kwargs: Any) -> T:
        async def beside() -> T:
            stop = asyncio.Event()
            watching = asyncio.create_task(own_lag(stop))
            try:
                return await main
            finally:
                stop.set()
                await watching

        return run(beside(), **kwargs)

    return running


def report() -> None:
    print("full (generation 2) collections:")
    for _, wall, cpu, thread, serving in WATCHED.collections:
        print(
            f"   {'while serving' if serving else 'start-up/close'}  {wall:6.1f} ms, {cpu:6.1f} ms of CPU, on {thread}"
        )
    lags = np.array([late for _, late in WATCHED.own])
    print(
        f"the loop's own lag while serving (ms, less the run-queue wait): p50 {np.median(lags):.2f}"
        f"  p99 {np.percentile(lags, 99):.1f}  max {lags.max():.1f}; {int((lags > 20).sum())} over 20 ms,"
        f" {int((lags > 50).sum())} over 50 ms"
    )
    for when, late in WATCHED.own:
        if late > 50:
            overlapping = [
                f"a full collection of {wall:.0f} ms on {thread}"
                for start, wall, _, thread, _ in WATCHED.collections
                if start < when + (late + 2) / 1000 and start + wall / 1000 > when
            ]
            print(f"   {late:6.1f} ms: {', '.join(overlapping) or 'no full collection'}")
    for key, values in WATCHED.waits.items():
        if values:
            waited = np.array(values)
            print(
                f"{key}: {len(waited)}, p50 {np.median(waited):.2f}  p99 {np.percentile(waited, 99):.1f}"
                f"  max {waited.max():.1f} ms"
            )


def main() -> None:
    gc.callbacks.append(WATCHED.collected)
    serving_marked()
    timed(LearningService, "caught_up", "caught_up")
    timed(LearningThread, "read", "read")
    asyncio.run = watched_run(asyncio.run)  # overhead.py's main runs under it
    sys.argv = [str(OVERHEAD), *sys.argv[1:]]
    sys.path.insert(0, str(OVERHEAD.parent))
    runpy.run_path(str(OVERHEAD), run_name="__main__")
    report()


if __name__ == "__main__":
    main()
