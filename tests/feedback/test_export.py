"""The export's JSON Lines: every execution once, in log order, with its fields as recorded, however
the log splits into chunks (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from datetime import datetime, timedelta

import pytest

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.export import execution_chunks

PG_URL = os.environ.get("TOOLWISE_TEST_PG_URL")


async def exported(service: FeedbackService, namespace: str, **scope: datetime) -> list[dict[str, object]]:
    await service.flush()
    lines: list[dict[str, object]] = []
    async for rows, text in execution_chunks(service.engine, namespace=namespace, batch=7, **scope):
        assert text.endswith("\n") and text.count("\n") == rows  # one line a row, newlines inside escaped
        lines += [json.loads(line) for line in text.splitlines()]
    return lines


async def check_export(service: FeedbackService, namespace: str) -> None:
    now = utcnow()
    for i in range(30):
        execution = make_execution(
            f"s__t{i % 3}",
            success=i % 4 != 0,
            namespace=namespace,
            query=f"ligne {i}\nzweite Zeile — ünïcode",
            arguments={"text": f"call {i}", "nested": {"n": i}},
            explored=None if i % 2 else bool(i % 3),
        )
        execution.finished_at = now - timedelta(hours=30 - i)
        await service.log.record_execution(execution)
    await service.log.record_execution(make_execution(namespace=f"{namespace}-other"))
    lines = await exported(service, namespace)
    records = [e for batch in [b async for b in service.log.iter_executions(namespace=namespace)] for e in batch]
    assert [line["seq"] for line in lines] == [e.seq for e in records]  # all of them, in log order, once
    first = lines[5]
    assert first["query"] == "ligne 5\nzweite Zeile — ünïcode" and first["arguments"] == records[5].arguments
    assert first["success"] is True and lines[4]["success"] is False and first["explored"] is None
    assert lines[4]["explored"] is True and lines[6]["explored"] is False
    assert datetime.fromisoformat(str(first["finished_at"])) == records[5].finished_at
    async for _, text in execution_chunks(service.engine, namespace=namespace, kind="execution"):
        assert all(json.loads(line) == {"type": "execution", **lines[i]} for i, line in enumerate(text.splitlines()))
    since, until = now - timedelta(hours=20, minutes=30), now - timedelta(hours=5, minutes=30)
    window = await exported(service, namespace, since=since, until=until)
    assert [line["seq"] for line in window] == [e.seq for e in records if since <= e.finished_at < until]


async def test_export_chunks_hold_every_execution_in_order_on_sqlite(service: FeedbackService) -> None:
    await check_export(service, "default")


async def test_export_chunks_hold_every_execution_in_order_on_postgresql() -> None:
    if not PG_URL:
        pytest.skip("TOOLWISE_TEST_PG_URL is not set (.ci/run starts PostgreSQL and sets it)")
    async with FeedbackService(PG_URL) as service:
        await check_export(service, f"test-{uuid.uuid4().hex[:8]}")


async def test_an_export_stopped_early_leaves_no_chunk_being_read(service: FeedbackService) -> None:
    for i in range(40):
        await service.log.record_execution(make_execution(f"s__t{i % 3}"))
    await service.flush()
    chunks = execution_chunks(service.engine, batch=5, readers=3)
    async for rows, _ in chunks:
        assert rows == 5
        break
    await chunks.aclose()  # the two chunks read ahead are cancelled, not left running
    assert [t for t in asyncio.all_tasks() if t.get_coro().__qualname__.endswith("encode")] == []
    with pytest.raises(ValueError, match="readers must be ≥ 1, got 0"):
        await anext(execution_chunks(service.engine, readers=0))
