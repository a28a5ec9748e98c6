"""The log at scale: reads walk (namespace, seq) on both backends, per-tool summaries maintained with
the log equal the SQL recomputation (after ratings, retention and a migration of an existing log, on
SQLite and PostgreSQL), episodes are read in pages."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
from alembic import command
from sqlalchemy import event, text

from tests.feedback.conftest import make_execution, rerated
from tests.feedback.exact_metrics import recompute_action_summary, recompute_tool_metrics
from toolwise.feedback import Episode, FeedbackService, ToolMetrics, utcnow
from toolwise.feedback.export_workers import Workers
from toolwise.feedback.migrate import alembic_config
from toolwise.feedback.records import ActionSummary
from toolwise.feedback.toolstats import RELATIVE_ACCURACY


def assert_same(maintained: list[ToolMetrics], recomputed: list[ToolMetrics]) -> None:
    assert [m.tool for m in maintained] == [m.tool for m in recomputed]
    for m, r in zip(maintained, recomputed, strict=True):
        assert (m.calls, m.ratings, m.last_used) == (r.calls, r.ratings, r.last_used)
        assert m.success_rate == pytest.approx(r.success_rate)
        assert m.avg_latency_ms == pytest.approx(r.avg_latency_ms)
        assert m.avg_rating == pytest.approx(r.avg_rating)
        assert m.p95_latency_ms == pytest.approx(r.p95_latency_ms, rel=RELATIVE_ACCURACY)


def assert_same_actions(maintained: list[ActionSummary], recomputed: list[ActionSummary]) -> None:
    assert [(a.tool, a.calls, a.explored) for a in maintained] == [(a.tool, a.calls, a.explored) for a in recomputed]
    for m, r in zip(maintained, recomputed, strict=True):
        assert m.success_rate == pytest.approx(r.success_rate)
        assert m.mean_reward == pytest.approx(r.mean_reward)


async def assert_summaries_equal_the_log(service: FeedbackService, namespace: str) -> None:
    """Metrics, action summaries and the count of a namespace, maintained against recomputed."""
    recomputed = await recompute_tool_metrics(service, namespace=namespace)
    assert_same(await service.reports.get_tool_metrics(namespace=namespace), recomputed)
    assert_same_actions(
        await service.reports.action_summary(namespace), await recompute_action_summary(service, namespace)
    )
    async with service.engine.connect() as conn:
        query = text("SELECT count(*) FROM executions WHERE namespace = :ns")
        assert (
            await service.reads.count_executions(namespace) == (await conn.execute(query, {"ns": namespace})).scalar()
        )


async def fill(service: FeedbackService, n: int, *, namespace: str = "default", seed: int = 0) -> list[str]:
    """n executions of five tools with spread-out latencies (some old), a tenth of them rated."""
    rng = np.random.default_rng(seed)
    ids = []
    for i in range(n):
        tool = f"s__t{rng.integers(5)}"
        latency = float(rng.lognormal(np.log(30), 1.2))
        reward = None if i % 7 == 0 else float(rng.normal(5, 6))  # some calls not learned (yet)
        success = bool(rng.random() < 0.8)
        explored = None if i % 3 == 0 else bool(rng.random() < 0.3)  # not every call followed a recommendation
        execution = make_execution(
            tool, latency_ms=latency, success=success, namespace=namespace, reward=reward, explored=explored
        )
        if i % 4 == 0:
            execution.finished_at -= timedelta(days=60)
        ids.append(await service.log.record_execution(execution))
    for execution_id in ids[::10]:
        await service.log.add_rating(execution_id, int(rng.integers(1, 6)))
    return ids


@pytest.fixture(params=["sqlite", "postgresql"])
async def backend(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[tuple[FeedbackService, str]]:
    """A service on a real SQLite file or the real PostgreSQL server, and a namespace of its own."""
    url = db_url if request.param == "sqlite" else request.getfixturevalue("pg_url")
    async with FeedbackService(url) as svc:
        yield svc, f"test-{uuid.uuid4().hex[:8]}"


async def test_maintained_summaries_equal_the_sql_recomputation(backend: tuple[FeedbackService, str]) -> None:
    service, namespace = backend
    elsewhere = f"{namespace}-elsewhere"
    ids = await fill(service, 400, namespace=namespace)
    await fill(service, 50, namespace=elsewhere, seed=1)
    await assert_summaries_equal_the_log(service, namespace)
    assert_same(
        await service.reports.get_tool_metrics("s__t3", namespace=namespace),
        await recompute_tool_metrics(service, "s__t3", namespace=namespace),
    )
    await service.log.add_rating(ids[0], 5, rerate=rerated, unrated=lambda _: 11.0)  # a call not rewarded yet
    await service.log.add_rating(ids[1], 1, rerate=rerated)  # ... and one that had a reward
    await assert_summaries_equal_the_log(service, namespace)
    seq, _ = await service.reads.high_water(namespace)
    pruned = await service.log.prune(utcnow() - timedelta(days=30), namespace=namespace, max_seq=seq)
    assert pruned == 100  # every fourth execution was old: retention takes it out of the summaries too
    await assert_summaries_equal_the_log(service, namespace)
    await assert_summaries_equal_the_log(service, elsewhere)
    everything_old = utcnow() + timedelta(days=1)  # a tool whose calls are all pruned leaves the summary
    await service.log.prune(everything_old, namespace=elsewhere, max_seq=(await service.reads.heads(elsewhere))[0])
    assert (
        await service.reports.action_summary(elsewhere) == [] and await service.reads.count_executions(elsewhere) == 0
    )


async def test_metrics_from_memory_follow_every_write_here_and_another_instances_once_probed(
    backend: tuple[FeedbackService, str],
) -> None:
    service, namespace = backend
    ids = await fill(service, 60, namespace=namespace)
    await assert_summaries_equal_the_log(service, namespace)  # the answer is kept from here on
    before = {m.tool: m for m in await service.reports.get_tool_metrics(namespace=namespace)}
    await service.log.record_execution(make_execution("s__t1", latency_ms=5000.0, namespace=namespace))
    await service.log.add_rating(ids[1], 5)
    after = {m.tool: m for m in await service.reports.get_tool_metrics(namespace=namespace)}
    assert after["s__t1"].calls == before["s__t1"].calls + 1
    assert sum(m.ratings for m in after.values()) == sum(m.ratings for m in before.values()) + 1
    await assert_summaries_equal_the_log(service, namespace)
    async with FeedbackService(service.url) as other:  # another instance on the same database
        await fill(other, 30, namespace=namespace, seed=3)
    await service.reads.heads(namespace)  # the sync tick's probe of the log sees it moved
    await assert_summaries_equal_the_log(service, namespace)
    top = await service.reports.get_tool_metrics(namespace=namespace, limit=2)
    assert top == sorted(await service.reports.get_tool_metrics(namespace=namespace), key=lambda m: -m.calls)[:2]


async def test_episodes_are_read_in_pages_newest_first(backend: tuple[FeedbackService, str]) -> None:
    service, namespace = backend
    now = utcnow()
    for i in range(11):  # pairs ending at the same moment: the page boundary falls between equals
        ended = now - timedelta(hours=i // 2)
        episode = Episode(f"s{i}", ["a", "b"], float(i), "success", ended - timedelta(minutes=5), ended, namespace)
        await service.log.record_episode(episode)
    await service.log.record_episode(Episode("other", ["a"], 0.0, "success", now, now, f"{namespace}-other"))
    paged = [e async for batch in service.reports.iter_episodes(namespace=namespace, batch=3) for e in batch]
    assert sorted(e.id for e in paged) == sorted(e.id for e in await service.reports.get_episodes(namespace=namespace))
    assert len(paged) == 11 and [e.ended_at for e in paged] == sorted((e.ended_at for e in paged), reverse=True)
    since, until = now - timedelta(hours=3, minutes=30), now - timedelta(minutes=30)
    pages = service.reports.iter_episodes(namespace=namespace, since=since, until=until, batch=2)
    window = [e async for batch in pages for e in batch]
    assert sorted(e.session_id for e in window) == ["s2", "s3", "s4", "s5", "s6", "s7"]


async def logged_mean_reward(service: FeedbackService, namespace: str = "default") -> float | None:
    """The mean reward per call that has one, averaged by the database over the whole log."""
    async with service.engine.connect() as conn:
        query = text("SELECT avg(reward) FROM executions WHERE namespace = :ns AND reward IS NOT NULL")
        value = (await conn.execute(query, {"ns": namespace})).scalar()
    return None if value is None else float(value)


async def test_the_mean_reward_from_the_summaries_equals_the_logs_average(service: FeedbackService) -> None:
    assert await service.reports.mean_reward() is None  # nothing logged: no mean, not 0
    ids = await fill(service, 300)
    await fill(service, 40, namespace="elsewhere", seed=1)
    assert await service.reports.mean_reward() == pytest.approx(await logged_mean_reward(service))
    await service.log.add_rating(ids[0], 5, rerate=rerated, unrated=lambda _: 11.0)  # a call not rewarded yet
    await service.log.add_rating(ids[1], 1, rerate=rerated)  # ... and one that had a reward
    assert await service.reports.mean_reward() == pytest.approx(await logged_mean_reward(service))
    seq, _ = await service.reads.high_water()
    await service.log.prune(utcnow() - timedelta(days=30), max_seq=seq)
    assert await service.reports.mean_reward() == pytest.approx(await logged_mean_reward(service))
    elsewhere = await service.reports.mean_reward("elsewhere")
    assert elsewhere == pytest.approx(await logged_mean_reward(service, "elsewhere"))


@pytest.mark.parametrize("revision", ["0002", "0004", "0005", "0006"])
async def test_a_migrated_log_gets_its_summaries(db_url: str, revision: str) -> None:
    async with FeedbackService(db_url) as service:
        await fill(service, 120)
        async with service.engine.begin() as conn:  # back to an earlier schema, log kept
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), revision))
    async with FeedbackService(db_url) as service:  # start-up upgrades and summarises what is there
        await assert_summaries_equal_the_log(service, "default")
        assert await service.reports.mean_reward() == pytest.approx(await logged_mean_reward(service))


class Statements:
    """The SELECTs a service sends while `with` it, with their parameters."""

    def __init__(self, service: FeedbackService) -> None:
        self.engine = service.engine.sync_engine
        self.seen: list[tuple[str, Any]] = []

    def _hear(self, conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and "executions" in statement:
            self.seen.append((statement, parameters))

    def __enter__(self) -> Statements:
        event.listen(self.engine, "before_cursor_execute", self._hear)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(self.engine, "before_cursor_execute", self._hear)


def hear_jobs(heard: Statements) -> Callable[[subprocess.Popen[bytes], bytes], tuple[int, bytes]]:
    ask = Workers._ask

    def asked(process: subprocess.Popen[bytes], job: bytes) -> tuple[int, bytes]:
        sent = json.loads(job)
        heard.seen.append((sent["sql"], tuple(sent["params"])))
        return ask(process, job)

    return asked


async def read_the_log(service: FeedbackService, namespace: str) -> list[tuple[str, Any]]:
    """Every log read a sync, a replay and an export make, as sent to the database (an SQLite file's
    export batches as its worker processes are asked to run them); the log holds ≥ 300 executions."""
    with Statements(service) as heard, patch.object(Workers, "_ask", staticmethod(hear_jobs(heard))):
        await service.reads.heads(namespace)
        async for _ in service.reads.iter_log(namespace=namespace, after_seq=10, batch=50):
            pass
        async for _ in service.reports.iter_executions(namespace=namespace, after_seq=10, batch=50):
            pass
        async for _ in service.reports.iter_execution_lines(namespace=namespace, batch=50):
            pass
    # What is checked must have been heard: the heads probe, and every page of the three walks (the 290
    # executions after seq 10 are 6 pages of 50 each; the export's pages come as ordered statements too).
    assert sum("max(" in statement for statement, _ in heard.seen) == 1, heard.seen
    assert sum("ORDER BY" in statement for statement, _ in heard.seen) >= 3 * 6, heard.seen
    return heard.seen


async def test_log_reads_walk_the_seq_index_on_sqlite(service: FeedbackService) -> None:
    await fill(service, 300)
    await fill(service, 300, namespace="elsewhere")
    async with service.engine.connect() as conn:
        await conn.execute(text("ANALYZE"))
        for statement, parameters in await read_the_log(service, "default"):
            plan = " | ".join(
                row[-1] for row in await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
            if "ORDER BY" in statement or "max(" in statement:
                assert "ix_executions_ns_seq" in plan, plan
            assert "TEMP B-TREE" not in plan, plan


@pytest.fixture
async def pg_service(pg_url: str) -> AsyncIterator[tuple[FeedbackService, str]]:
    async with FeedbackService(pg_url) as svc:
        yield svc, f"test-{uuid.uuid4().hex[:8]}"


async def test_log_reads_walk_the_seq_index_on_postgresql(pg_service: tuple[FeedbackService, str]) -> None:
    service, namespace = pg_service
    await fill(service, 600, namespace=namespace)
    async with service.engine.connect() as conn:
        await conn.execute(text("ANALYZE executions"))
        await conn.execute(text("SET enable_seqscan = off"))  # a small table: the planner would just scan it
        await conn.execute(text("SET enable_bitmapscan = off"))  # ... or, for a last page of ~50 rows, sort them
        for statement, parameters in await read_the_log(service, namespace):
            literal = statement
            for i, value in reversed(list(enumerate(parameters, start=1))):
                quoted = "'" + str(value).replace("'", "''") + "'" if isinstance(value, str) else str(value)
                literal = literal.replace(f"${i}", quoted)
            plan = " | ".join(row[0] for row in await conn.exec_driver_sql(f"EXPLAIN {literal}"))
            if "ORDER BY" in statement or "max(" in statement:
                # seq in order: (namespace, seq), or the seq key itself while one namespace fills the table
                assert "using ix_executions_ns_seq" in plan or "using executions_pkey" in plan, plan
            assert "Sort" not in plan, plan


async def test_summaries_views_read_no_execution(service: FeedbackService) -> None:
    """`inspect top-actions`, `compare`, `status` and the export's summaries and progress bar: O(tools)."""
    await fill(service, 50)
    with Statements(service) as heard:
        assert [a.calls for a in await service.reports.action_summary()] == sorted(
            (a.calls for a in await service.reports.action_summary()), reverse=True
        )
        assert await service.reads.count_executions() == 50
        assert await service.reports.namespaces() == ["default"]
    assert heard.seen == []


async def test_rating_reads_look_executions_up_by_key_on_sqlite(service: FeedbackService) -> None:
    """A sync or export reads ratings by id and fetches each one's execution by key: driven from the
    executions side, every batch walked the whole namespace (9 s for 10k ratings at 1M executions)."""
    ids = await fill(service, 300)
    await service.log.add_rating(ids[0], 2)  # its second rating: `previous` has something to find
    with Statements(service) as heard:
        events = [e async for batch in service.reads.iter_rating_events(batch=7) for e in batch.events]
    order = [e.rating.id or 0 for e in events]
    assert order == sorted(order) and 0 not in order and len(events) == 31
    assert events[-1].previous is not None
    async with service.engine.connect() as conn:
        await conn.execute(text("ANALYZE"))
        for statement, parameters in heard.seen:
            plan = " | ".join(
                row[-1] for row in await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            )
            assert "SCAN executions" not in plan and "executions USING INDEX ix_executions_ns" not in plan, plan
            if "JOIN executions" in statement:  # a batch: a range of rating ids, each execution by its key
                assert "SEARCH ratings USING INTEGER PRIMARY KEY (rowid>?)" in plan, plan
                assert "SEARCH executions USING INDEX sqlite_autoindex_executions_1 (id=?)" in plan, plan


async def test_the_newest_call_of_a_tool_reads_the_window_not_the_tools_history_on_sqlite(
    service: FeedbackService,
) -> None:
    """submit_feedback by tool name looks for the newest call of the tool in the last 10 minutes: it walked
    every call the tool ever had (220 ms at 300k calls of one tool when none was recent, which is when the
    rating is refused), as toolwise runs no ANALYZE to tell SQLite that the window is the small side."""
    ids = await fill(service, 300)
    async with service.engine.begin() as conn:  # all but the newest 20 calls long finished
        await conn.execute(text("UPDATE executions SET finished_at = '2026-01-01 00:00:00+00:00' WHERE seq <= 280"))
    newest = await service.reads.get_execution(ids[-1])
    assert newest is not None
    since = utcnow() - timedelta(minutes=10)
    with Statements(service) as heard:
        found = await service.reads.latest_of(newest.tool, since=since, owner="s1")
    assert found is not None and found.id == ids[-1]
    async with service.engine.connect() as conn:
        for statement, parameters in heard.seen:
            plan = [row[-1] for row in await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)]
            walks = [step for step in plan if step.startswith(("SEARCH executions", "SCAN executions"))]
            assert walks and all("rowid>?" in step or "finished_at>?" in step for step in walks), plan
