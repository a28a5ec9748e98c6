"""The full replay of a log in-process: what a start with no usable snapshot spends catching up.

    python bench/replay.py DB [--tools 500] [--profile OUT.prof] [--top1 OUT.json] [--compare IN.json]
                              [--limit N]

Opens DB (a database `bench/scale.py --keep` filled; its snapshots are deleted first, as `--reuse`
does: run it on a copy), builds the services as a server does with the catalogue of
`bench/many_tools_server.py` (`--tools` tools under the server name `many`), and runs the start-up
catch-up (periodic snapshots every `snapshot_rows`, as the server does). Prints wall and CPU seconds,
rows/s, the learned state's sizes and RSS (before, after, after `malloc_trim`), and as its reference
the same process's time to read the log alone (`iter_log` batches, nothing learned). `--top1` writes
the top recommendation for a sample of (query, previous tool) pairs; `--compare` checks them against
a file an earlier run wrote (the learned state must not change with a faster replay).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import ctypes
import gc
import json
import logging
import sqlite3
import sys
import time
import tracemalloc
from collections import Counter
from contextlib import aclosing
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from many_tools_server import catalogue  # bench/ is not a package
from scale import QUERIES

from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.server.services import Services


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def malloc_trim() -> None:
    """Hand freed heap back to the system (glibc), so what RSS shows next is what is still held."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def top1(services: Services, tools: int) -> dict[str, str]:
    """The policy's top tool for each sample query, after no tool and after a few tools."""
    learner = services.learning.learner
    previous = [None, *(f"many__tool_{k:04d}" for k in (0, 1, 7, 42, tools - 1))]
    return {
        f"{query} | {prev}": learner.estimates(query, prev, 1 if prev else 0)[0][0]
        for query in QUERIES
        for prev in previous
    }


def held(services: Services) -> None:
    """Python objects alive after the replay, by type, and the learned state's arrays."""
    gc.unfreeze()  # a long replay froze what start-up left alive: listed here too
    counts: Counter[str] = Counter()
    for obj in gc.get_objects():
        counts[type(obj).__name__] += 1
    print("objects tracked by the GC:", ", ".join(f"{name} {n:,}" for name, n in counts.most_common(12)))
    learner = services.learning.learner
    columns = learner.sequences._cold
    if columns is not None:
        print(f"n-gram columns: {sum(a.nbytes for a in columns.columns.values()) / 1e6:.1f} MB")
    print(f"n-gram dicts: {len(learner.sequences._table):,} prefixes")
    sharing = services.sharing
    print(f"sharing: {len(sharing._logged):,} sessions' tools, {len(sharing._queries):,} sessions' queries")
    large: Counter[str] = Counter()
    for owner in gc.get_objects():
        for held_object in gc.get_referents(owner):
            size = held_object.nbytes if isinstance(held_object, np.ndarray) else 0
            size = len(held_object) if isinstance(held_object, bytes) else size
            if size >= 1_000_000:
                large[f"{type(held_object).__name__} held by a {type(owner).__name__}"] += size
    print("large buffers:", ", ".join(f"{what} {size / 1e6:.1f} MB" for what, size in large.most_common(8)))
    sys._debugmallocstats()  # pymalloc's arenas (to stderr): small objects freed but their arenas still held


async def read_only(feedback: FeedbackService) -> float:
    """Seconds to read the whole log as the replay's batches do (the entries only)."""
    begin = time.perf_counter()
    async with aclosing(feedback.reads.iter_log()) as batches:
        async for _ in batches:
            pass
    return time.perf_counter() - begin


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--top1", type=Path)
    parser.add_argument("--compare", type=Path)
    parser.add_argument("--no-reference", action="store_true", help="skip reading the log alone")
    parser.add_argument("--memory", action="store_true", help="print what the process holds after the replay")
    parser.add_argument("--tracemalloc", action="store_true", help="with --memory: where what is held was allocated")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    with sqlite3.connect(args.db) as conn:
        conn.execute("DELETE FROM snapshots")
    settings = Settings(database_url=f"sqlite+aiosqlite:///{args.db}", seed=0)
    async with FeedbackService(settings.database_url) as feedback:
        reference = None if args.no_reference else await read_only(feedback)
        services = Services.open(settings, feedback)
        tools = [t.model_copy(update={"name": f"many__{t.name}"}) for t in catalogue(args.tools)]
        await services.learning.set_tools(tools)
        malloc_trim()
        before = rss_mb()
        if args.tracemalloc:
            tracemalloc.start()
        profiler = cProfile.Profile() if args.profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        learned = await services.snapshots.catch_up(settings.snapshot_rows)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(args.profile)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        after = rss_mb()
        malloc_trim()
        trimmed = rss_mb()
        learner = services.learning.learner
        print(f"replayed {learned:,} entries: {wall:.1f} s wall, {cpu:.1f} s CPU ({learned / wall:,.0f} rows/s)")
        if reference is not None:
            print(f"reference: reading the log alone (iter_log) {reference:.1f} s")
        print(f"RSS: {before:.0f} MB before, {after:.0f} MB after, {trimmed:.0f} MB after malloc_trim")
        print(f"learned state: policy {learner.nbytes() / 1e6:.1f} MB, {len(learner.sequences):,} n-grams")
        if args.memory:
            held(services)
        if args.tracemalloc:
            for stat in tracemalloc.take_snapshot().statistics("lineno")[:25]:
                print(stat)
        if args.top1 or args.compare:
            picks = top1(services, args.tools)
            if args.top1:
                args.top1.write_text(json.dumps(picks, indent=0))
            if args.compare:
                earlier = json.loads(args.compare.read_text())
                same = np.mean([picks[k] == earlier[k] for k in earlier])
                print(f"top-1 same as {args.compare}: {same:.1%} of {len(earlier)}")


if __name__ == "__main__":
    asyncio.run(main())
