"""Ingest throughput: FeedbackService group commit vs a naive session-and-commit per execution.

Both write to a fresh SQLite file with the same engine settings (WAL, synchronous=FULL), so the ratio
measures the write path alone. Throughput counts from the first record to the moment it is durable
(after `flush()`).

    python bench/ingest.py [--n 50000] [--naive-n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession

from toolwise.feedback import Execution, FeedbackService, argument_digest, utcnow
from toolwise.feedback.engine import create_engine
from toolwise.feedback.schema import Base, ExecutionRow


def execution(i: int) -> Execution:
    finished = utcnow()
    return Execution(
        tool=f"srv__tool{i % 50}",
        server="srv",
        session_id=f"s{i % 100}",
        success=i % 7 != 0,
        latency_ms=5.0 + i % 40,
        started_at=finished - timedelta(milliseconds=5),
        finished_at=finished,
        arguments={"path": f"/tmp/{i}", "n": i},
        context_hash="ab" * 32,
        query="list files",
    )


async def ours(url: str, n: int) -> float:
    async with FeedbackService(url) as svc:
        records = [execution(i) for i in range(n)]
        start = time.perf_counter()
        for record in records:
            await svc.log.record_execution(record)
        await svc.flush()
        elapsed = time.perf_counter() - start
        assert svc.stats.committed == n
    return n / elapsed


async def naive(url: str, n: int) -> float:
    """The seed's pattern: one session and one commit per execution."""
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    records = [execution(i) for i in range(n)]
    start = time.perf_counter()
    for e in records:
        async with AsyncSession(engine) as session:
            session.add(
                ExecutionRow(
                    id=e.id,
                    namespace=e.namespace,
                    session_id=e.session_id,
                    tool=e.tool,
                    server=e.server,
                    argument_digest=argument_digest(e.arguments),
                    context_hash=e.context_hash,
                    query=e.query,
                    success=e.success,
                    latency_ms=e.latency_ms,
                    result_size=0,
                    started_at=e.started_at,
                    finished_at=e.finished_at,
                )
            )
            await session.commit()
    elapsed = time.perf_counter() - start
    await engine.dispose()
    return n / elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--naive-n", type=int, default=2_000, help="baseline size (slow)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ours_rate = await ours(f"sqlite+aiosqlite:///{Path(tmp) / 'ours.db'}", args.n)
        naive_rate = await naive(f"sqlite+aiosqlite:///{Path(tmp) / 'naive.db'}", args.naive_n)
    print(f"FeedbackService group commit : {ours_rate:10,.0f} executions/s  (n={args.n:,})")
    print(f"naive commit per execution   : {naive_rate:10,.0f} executions/s  (n={args.naive_n:,})")
    print(f"ratio                        : {ours_rate / naive_rate:10.1f}x  (targets: ≥ 20,000/s and ≥ 50x)")


if __name__ == "__main__":
    asyncio.run(main())
