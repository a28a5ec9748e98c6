"""The event loop's lag as the benches read it: how late a task that asks to wake every millisecond wakes.

One watcher for bench/overhead.py, bench/catalogue_change.py and bench/replay_gap.py, so that their lags
are one measure."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

TICK_S = 0.001


@asynccontextmanager
async def lateness() -> AsyncIterator[list[float]]:
    """While the block runs, the ms each `TICK_S` sleep of a watching task woke late (the list fills as it runs)."""
    late: list[float] = []
    stop = asyncio.Event()

    async def watch() -> None:
        while not stop.is_set():
            begin = time.perf_counter()
            await asyncio.sleep(TICK_S)
            late.append((time.perf_counter() - begin - TICK_S) * 1000)

    watching = asyncio.create_task(watch())
    try:
        yield late
    finally:
        stop.set()
        await watching
