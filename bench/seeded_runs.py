"""Whether a seeded in-process run learns the same state every time: the same scenario run `--runs` times,
each run's learned state and records hashed, the distinct hashes counted (one is the promise: under a `seed`,
learning is as if each call had been learned on the spot, whatever the timing).

    python bench/seeded_runs.py [--runs 30] [--bursts 12] [--pause 0.2]

The scenario is bench/bursts.py's app (in-process, seed 0, the echo downstream), started fresh each run:
`--bursts` bursts of 1-29 back-to-back calls (sizes drawn from a fixed seed), `recommend_tool` before each,
a pause of up to `--pause` s after each (drawn likewise), so that idle drains, recommendations and the start's
catch-up meet at whatever times the machine gives them. What is legitimately timing is pinned: a call's
measured latency goes into its reward (the latency part), so every call is noted as taking 2 ms. Prints each
run's hashes (SHA-256 of `Learner.state_dict()`, as bench/learned_hash.py digests it; and of the records:
each execution's tool, context, position, followed decision, propensity, reward, in log order) and the count
of each. Run it with `PYTHONPATH=<the code before>/src` for the code before.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import sqlite3
import sys
import tempfile
from collections import Counter
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from call_path import app
from learned_hash import digest

from toolwise.learning import service
from toolwise.server.build import build_server

LATENCY_MS = 2.0  # every call's latency, as noted: the reward's latency part is then the same each run
_note = service.LearningService.note


def pinned(self: service.LearningService, session: Any, **call: Any) -> str:
    return _note(self, session, **{**call, "latency_ms": LATENCY_MS})


async def one_run(tmp: Path, bursts: int, pause: float) -> tuple[str, str]:
    """One fresh seeded run of the scenario; (state hash, records hash)."""
    drawn = random.Random(3)
    async with AsyncExitStack() as stack:
        toolwise = await stack.enter_async_context(app(tmp, "run", learning=True, settings={"seed": 0}))
        client = await stack.enter_async_context(Client(build_server(toolwise)))
        made = 0
        for burst in range(bursts):
            await client.call_tool("recommend_tool", {"query": f"say hello {burst % 7}"})
            for _ in range(drawn.randint(1, 29)):
                await client.call_tool("echo__echo", {"text": f"hello {made}"})
                made += 1
            await asyncio.sleep(drawn.random() * pause)
        await toolwise.learning.drain()
        state = hashlib.sha256()
        digest(toolwise.learning.learner.state_dict(), state)
    with sqlite3.connect(tmp / "run.db") as db:
        logged = db.execute(
            "SELECT tool, context_hash, position, decision_id IS NOT NULL, propensity, explored, reward"
            " FROM executions ORDER BY seq"
        ).fetchall()
    records = hashlib.sha256(repr(logged).encode())
    return state.hexdigest(), records.hexdigest()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--bursts", type=int, default=12)
    parser.add_argument("--pause", type=float, default=0.2, help="the most s after a burst")
    args = parser.parse_args()
    service.LearningService.note = pinned  # type: ignore[method-assign]
    seen: Counter[tuple[str, str]] = Counter()
    for run in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            hashes = await one_run(Path(tmp), args.bursts, args.pause)
        seen[hashes] += 1
        print(f"run {run:3d}: state {hashes[0][:16]}  records {hashes[1][:16]}", flush=True)
    print(f"{len(seen)} distinct of {args.runs} runs:")
    for (state, records), count in seen.most_common():
        print(f"   {count:3d} x  state {state[:16]}  records {records[:16]}")


if __name__ == "__main__":
    asyncio.run(main())
