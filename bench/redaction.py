"""What redaction costs per recorded execution, against what building the row costs without it.

Both figures time `ExecutionInsert.prepare` (what the writer task does for a batch while the previous
one commits; never on the path of a call) over the same executions (typical arguments and a query),
with `store_arguments` off (the default: the query and error message are scanned) and on (the
arguments too). The reference run swaps the redaction functions for identities.

    python bench/redaction.py [--n 20000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from toolwise.feedback import Execution, FeedbackService, utcnow
from toolwise.feedback import rows as rows_module
from toolwise.feedback.rows import ExecutionInsert

QUERIES = ["what changed in my repository since yesterday", "current time in Tokyo", "show the last 5 commits"]


def execution(i: int) -> Execution:
    finished = utcnow()
    return Execution(
        tool=f"git__tool{i % 20}",
        server="git",
        session_id=f"s{i % 100}",
        success=True,
        latency_ms=12.0,
        started_at=finished - timedelta(milliseconds=12),
        finished_at=finished,
        arguments={"repo_path": f"/home/me/src/project{i % 7}", "max_count": 10, "timezone": "Europe/Paris"},
        query=QUERIES[i % 3],
    )


def per_row_us(svc: FeedbackService, batch: list[Execution]) -> float:
    insert = ExecutionInsert(svc.rows, svc.engine.dialect)
    start = time.perf_counter()
    insert.prepare(batch)
    return (time.perf_counter() - start) / len(batch) * 1e6


async def measure(batch: list[Execution], repeat: int, store_arguments: bool) -> tuple[float, float]:
    """Medians of passes with and without redaction, alternated so machine drift weighs on both alike."""
    identity: Any = lambda value, *_: value  # noqa: E731
    names = vars(rows_module)  # the redaction functions as rows.py calls them
    real = names["redact"], names["redact_text"]
    with_it, without = [], []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite+aiosqlite:///{Path(folder) / 'b.db'}"
        async with FeedbackService(url, store_arguments=store_arguments) as svc:
            for _ in range(repeat):
                with_it.append(per_row_us(svc, batch))
                names["redact"] = names["redact_text"] = identity
                try:
                    without.append(per_row_us(svc, batch))
                finally:
                    names["redact"], names["redact_text"] = real
    return statistics.median(with_it), statistics.median(without)


async def main(n: int, repeat: int) -> None:
    batch = [execution(i) for i in range(n)]
    print(f"median of {repeat} passes over {n:,} executions, µs per execution")
    for store_arguments in (False, True):
        redacted, plain = await measure(batch, repeat, store_arguments)
        print(
            f"store_arguments={str(store_arguments).lower():5}  row with redaction {redacted:5.1f}, "
            f"without (reference) {plain:5.1f}: redaction adds {redacted - plain:4.1f} ({redacted / plain:.2f}×)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=9)
    options = parser.parse_args()
    asyncio.run(main(options.n, options.repeat))
