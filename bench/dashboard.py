"""The dashboard on a year of history: how long /dashboard takes to answer on a large log, per window of
its learning curves and per sort of its tools, next to the 200 ms target.

    python bench/dashboard.py [--database DB] [--executions 1000000] [--tools 500] [--rounds 7]

Fills DB (unless it holds executions already: `bench/scale.py --keep DIR` leaves one too) with
`bench/scale.py`'s year of executions, then asks the dashboard's ASGI app (the one `toolwise dashboard`
and `serve --http` serve) for the page, in process, and prints the median and worst wall time of each
request (`?part=main`: what an open page fetches every few seconds). The machine is shared: other
processes' load moves every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2 as httpx  # the SDK's HTTP client, with its ASGI transport
from scale import fill, filled, sqlite_url

from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.server.auth import http_access
from toolwise.server.dashboard import TREND_ROWS, WINDOWS
from toolwise.server.dashboard_http import dashboard_app

TARGET_MS = 200.0
REQUESTS = [f"?window={w}" for w in WINDOWS] + [
    "?sort=tool&order=asc",
    "?sort=reward&order=desc",
    "?sort=latency&order=desc&window=7d",
    "?part=main",
]


async def measure(url: str, rounds: int) -> list[tuple[str, float, float]]:
    """Per request: its median and worst wall time (ms), after one request that warms the caches."""
    access = http_access("127.0.0.1", Settings())
    async with FeedbackService(url) as feedback:
        app = dashboard_app(feedback, "default", url, access)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            found = []
            for query in REQUESTS:
                times = []
                for _ in range(rounds + 1):
                    begin = time.perf_counter()
                    answer = await client.get("/dashboard" + query)
                    times.append((time.perf_counter() - begin) * 1000)
                    if answer.status_code != 200:
                        raise RuntimeError(f"/dashboard{query} answered {answer.status_code}: {answer.text[:200]}")
                found.append((query, statistics.median(times[1:]), max(times[1:])))
                print(f"  /dashboard{query}: {found[-1][1]:.0f} ms median", file=sys.stderr, flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", type=Path)
    parser.add_argument("--executions", type=int, default=1_000_000)
    parser.add_argument("--tools", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        db = args.database or Path(scratch) / "dashboard.db"
        if not filled(db):
            print(f"filling {db} with {args.executions:,} executions…", file=sys.stderr, flush=True)
            seconds = asyncio.run(fill(db, args.executions, args.tools))
            print(f"  filled in {seconds:.0f} s", file=sys.stderr, flush=True)
        rows = filled(db)
        found = asyncio.run(measure(sqlite_url(db), args.rounds))
    print(f"\nbench/dashboard.py: /dashboard on {rows:,} executions over a year (SQLite), {args.rounds} rounds")
    print(f"(the trend reads at most the newest {TREND_ROWS:,} executions of its window)\n")
    print("| request | median | worst | target |")
    print("| --- | --- | --- | --- |")
    for query, median, worst in found:
        verdict = "ok" if median <= TARGET_MS else "OVER"
        print(f"| /dashboard{query} | {median:.0f} ms | {worst:.0f} ms | ≤ {TARGET_MS:.0f} ms {verdict} |")


if __name__ == "__main__":
    main()
