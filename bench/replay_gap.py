"""How long the event loop goes unserved while a start-up replays the log: the gaps between the ticks of a
1 ms timer task during `Sharing.catch_up`, in process, with the replay's time next to it (and without the
timer, the replay alone: what serving the loop costs it).

    python bench/scale.py --executions 50000 --tools 100 --keep /tmp/scale   # a log to replay, kept
    python bench/replay_gap.py /tmp/scale/scale.db [--rounds 3]

Each round replays a copy of the database with its snapshots dropped (the whole log). The reference is the
code before, run the same way in the same sitting: `PYTHONPATH=<its src> python bench/replay_gap.py …`.
The machine is shared: other processes' load moves every figure; compare rounds alternated with the reference.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from contextlib import AbstractAsyncContextManager, nullcontext
from pathlib import Path

import mcp_types as types
import numpy as np
from loop_ticks import TICK_S, lateness

from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.server.services import Services


def log_copy(db: Path, work: Path) -> tuple[Path, list[str]]:
    """A copy of `db` without its snapshots, and the tools its log names."""
    copy = work / "replay.db"
    with sqlite3.connect(db) as conn:
        conn.execute("VACUUM INTO ?", (str(copy),))
    with sqlite3.connect(copy) as conn:
        conn.execute("DELETE FROM snapshots")
        tools = [row[0] for row in conn.execute("SELECT DISTINCT tool FROM executions")]
    return copy, tools


async def replay(db: Path, tools: list[str], ticking: bool) -> tuple[int, float, list[float]]:
    """Entries replayed, seconds, and the gaps between the timer's ticks (ms) while it ran."""
    settings = Settings(database_url=f"sqlite+aiosqlite:///{db}", seed=0, sync_interval_s=0)
    async with FeedbackService(settings.database_url) as feedback:
        services = Services.open(settings, feedback)
        listed = [types.Tool(name=t, description=f"does {t}", input_schema={"type": "object"}) for t in tools]
        await services.learning.set_tools(listed)
        await services.learning.catalogue_taken()
        await services.snapshots.load_latest()
        watching: AbstractAsyncContextManager[list[float]] = lateness() if ticking else nullcontext([])
        async with watching as late:
            began = time.perf_counter()
            learned = await services.sharing.catch_up()
            seconds = time.perf_counter() - began
        await services.learning.aclose()
    return learned, seconds, [TICK_S * 1000 + ms for ms in late]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path, help="a toolwise SQLite database whose log to replay")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="replay-gap-") as tmp:
        copy, tools = log_copy(args.db, Path(tmp))
        print("| round | entries | replay s, timer on | tick gap ms p50 / p99 / max | replay s, timer off |")
        print("|---|---:|---:|---|---:|")
        for k in range(args.rounds):
            learned, seconds, gaps = await replay(copy, tools, ticking=True)
            _, alone, _ = await replay(copy, tools, ticking=False)
            g = np.array(gaps or [0.0])
            spread = f"{np.percentile(g, 50):.2f} / {np.percentile(g, 99):.1f} / {g.max():.1f}"
            print(f"| {k + 1} | {learned:,} | {seconds:.2f} | {spread} | {alone:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
