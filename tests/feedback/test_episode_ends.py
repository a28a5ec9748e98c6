"""Episode ends are read as the log's other entries are: in order from a watermark, each with its last
call, through indexes (a sync tick or a replay never scans the episodes)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import text

from tests.feedback.test_log_at_scale import Statements, fill
from toolwise.feedback import Episode, FeedbackService, utcnow


async def end(service: FeedbackService, session_id: str, last: str | None, namespace: str = "default") -> Episode:
    now = utcnow()
    episode = Episode(
        session_id, ["s__t0"], 1.0, "success", now - timedelta(seconds=1), now, namespace, last_execution=last
    )
    return await service.log.record_episode(episode)


async def test_episode_ends_come_in_order_with_their_last_call_through_indexes(service: FeedbackService) -> None:
    ids = await fill(service, 200)
    await fill(service, 50, namespace="elsewhere")
    ended = [await end(service, f"s{i}", ids[i * 10]) for i in range(12)]
    gone = await end(service, "gone", None)  # its last call pruned (or never known)
    await end(service, "other", ids[5], namespace="elsewhere")
    seqs = [e.seq or 0 for e in ended]
    assert seqs == sorted(seqs) and 0 not in seqs  # the order a sync walks
    with Statements(service) as heard:
        walked = [e async for batch in service.reads.iter_episode_ends(after_seq=seqs[1], batch=4) for e in batch]
        after = await service.reads.episode_ends_after([ids[30], ids[40], ids[41]])
    assert [e.id for e in walked] == [e.id for e in ended[2:]] + [gone.id] and walked[-1].execution is None
    assert [e.execution.id for e in walked[:-1] if e.execution] == [ids[i * 10] for i in range(2, 12)]
    assert [(e.id, e.execution.id if e.execution else None) for e in after] == [
        (ended[3].id, ids[30]),
        (ended[4].id, ids[40]),
    ]
    async with service.engine.connect() as conn:
        await conn.execute(text("ANALYZE"))
        for statement, parameters in heard.seen:
            plan = " | ".join(
                row[-1] for row in await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
            assert "SCAN episodes" not in plan and "SCAN executions" not in plan and "TEMP B-TREE" not in plan, plan
            assert "ix_episodes_ns_seq" in plan or "ix_episodes_last_execution" in plan, plan


async def test_recording_an_episode_again_returns_it_as_recorded_and_another_end_under_its_id_is_refused(
    service: FeedbackService,
) -> None:
    """A retry of a recording that committed and reported an error anyway: the episode is there once."""
    [last] = await fill(service, 1)
    first = await end(service, "s", last)
    again = await service.log.record_episode(replace(first, seq=None, outcome="failure", ended_at=utcnow()))
    assert again == first  # as first recorded
    assert [e.id for e in await service.reports.get_episodes()] == [first.id]
    with pytest.raises(ValueError, match="is recorded for session 's'"):
        await service.log.record_episode(replace(first, seq=None, session_id="other"))
