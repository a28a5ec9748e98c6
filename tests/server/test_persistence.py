"""Learned state that lasts and travels: snapshots, restarts, the shared log, shadow mode, shields.

In-process against a real SQLite file (and a real PostgreSQL server when TOOLWISE_TEST_PG_URL is
set): the services as the server runs them, without the MCP surface."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp_types as types
import numpy as np
import pytest
from numpy.typing import NDArray

from toolwise.config import Settings
from toolwise.downstream.outcome import CallOutcome
from toolwise.downstream.shields import Budget, Shields
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.migrate import head, revision
from toolwise.learning import core as learning_core
from toolwise.learning import snapshots
from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.learning.watermark import Watermark
from toolwise.server.services import Services
from toolwise.server.stats import learning_stats

TOOLS = [
    types.Tool(name="git__git_status", description="Shows the working tree status", input_schema={"type": "object"}),
    types.Tool(name="git__git_log", description="Shows the commit logs", input_schema={"type": "object"}),
    types.Tool(name="git__git_diff", description="Shows differences between commits", input_schema={"type": "object"}),
    types.Tool(
        name="time__get_current_time", description="Current time in a timezone", input_schema={"type": "object"}
    ),
]
QUERIES = ["what changed in my repo", "show the history of commits", "what time is it in Tokyo"]


def settings(url: str, **overrides: Any) -> Settings:
    return Settings(database_url=url, seed=5, sync_interval_s=0, **overrides)


async def service(url: str, **overrides: Any) -> tuple[FeedbackService, Services]:
    feedback = FeedbackService(url, flush_interval_ms=1)
    await feedback.start()
    services = Services.open(settings(url, **overrides), feedback)
    await services.learning.set_tools(TOOLS)
    return feedback, services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


def proxied(services: Services, session_id: str, tool: str, outcome: CallOutcome | None = None) -> str:
    """Note a proxied call of `tool` (20 ms; by default a success) in session `session_id`; its execution id."""
    return services.learning.note(
        services.learning.sessions.get(session_id),
        tool=tool,
        server=tool.split("__", maxsplit=1)[0],
        arguments=None,
        outcome=CallOutcome(result_size=10) if outcome is None else outcome,
        started_at=utcnow(),
        latency_ms=20.0,
    )


async def call(services: Services, session_id: str, query: str, tool: str, ok: bool = True) -> str:
    """A recommendation for `query` in the session, then a call of `tool` that works or not, recorded."""
    await services.agent.recommend(services.learning.sessions.get(session_id), query, 3, None)
    execution_id = proxied(services, session_id, tool, None if ok else CallOutcome("ToolError", "boom", 10))
    await services.learning.drain()
    return execution_id


async def teach(services: Services, rounds: int = 12, prefix: str = "s") -> None:
    """A user who wants git_log for history questions and rates it well (and other picks badly)."""
    for i in range(rounds):
        session = f"{prefix}{i}"
        await call(services, session, QUERIES[1], "git__git_log")
        await services.agent.rate(services.learning.sessions.get(session), 5, None, "git__git_log", None)
        await call(services, session, QUERIES[0], "git__git_status")
        await call(services, session, QUERIES[0], "git__git_diff", ok=i % 3 != 0)
        await services.agent.rate(services.learning.sessions.get(session), 2, None, "git__git_diff", None)


def ranking(services: Services, query: str) -> list[tuple[str, float]]:
    decision = services.learning.learner.recommend(query, services.learning.state.rng, top_k=4)
    return [(r.tool, round(r.score, 9)) for r in decision.ranked]


async def test_restart_keeps_recommendations_identical(url: str) -> None:
    feedback, first = await service(url)
    await teach(first)
    await first.snapshots.save("shutdown")
    rng_state = first.learning.state.rng.bit_generator.state
    before = [ranking(first, q) for q in QUERIES]
    await feedback.aclose()

    feedback, second = await service(url)
    report = await second.snapshots.restore_latest()
    assert "snapshot 1" in report and "+ 0 log entries replayed" in report
    assert second.learning.state.rng.bit_generator.state == rng_state  # the rng goes on where it stopped
    assert [ranking(second, q) for q in QUERIES] == before
    await feedback.aclose()


async def test_after_a_crash_the_log_after_the_newest_snapshot_is_replayed(url: str) -> None:
    feedback, first = await service(url)
    await teach(first, rounds=4, prefix="early")
    await first.snapshots.save("periodic")
    at_snapshot = first.learning.learner.updates
    await teach(first, rounds=5, prefix="late")  # never snapshotted: the "crash" loses only memory
    await feedback.flush()
    learned = first.learning.learner.updates
    await feedback.aclose()

    feedback, second = await service(url)
    report = await second.snapshots.restore_latest()
    assert second.learning.learner.updates == learned > at_snapshot
    assert f"+ {learned - at_snapshot} log entries replayed" in report
    await feedback.aclose()


async def test_without_any_snapshot_the_whole_log_is_replayed(url: str) -> None:
    feedback, first = await service(url)
    await teach(first, rounds=6)
    learned = first.learning.learner.updates
    await feedback.aclose()
    feedback, second = await service(url)
    await second.snapshots.restore_latest()
    assert second.learning.learner.updates == learned
    await feedback.aclose()


async def test_snapshot_file_round_trip_and_refusals(url: str, tmp_path: Path) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=3)
    private, public = tmp_path / "key.pem", tmp_path / "key.pub"
    snapshots.generate_keys(private, public)
    record = snapshots.sign(services.snapshots.snapshot("manual"), snapshots.load_private_key(private))
    path = tmp_path / "state.snapshot"
    snapshots.write_file(record, path)
    loaded = snapshots.read_file(path)
    snapshots.verify(loaded, snapshots.load_public_key(public))
    assert loaded.payload == record.payload and loaded.sha256 == snapshots.checksum(record.payload)

    before = ranking(services, QUERIES[1])
    updates = services.learning.learner.updates
    other_private, other_public = tmp_path / "other.pem", tmp_path / "other.pub"
    snapshots.generate_keys(other_private, other_public)
    tampered = replace(loaded, payload=loaded.payload[:-1] + bytes([loaded.payload[-1] ^ 1]))
    refusals = {
        "checksum mismatch": tampered,
        "does not verify": loaded,  # checked with the wrong key below
        "major 2": replace(loaded, version="2.0.0"),
    }
    services.snapshots.verify_key = snapshots.load_public_key(other_public)
    for reason, bad in refusals.items():
        with pytest.raises(snapshots.SnapshotError, match=reason):
            await services.snapshots.adopt(bad, "restore")
        assert services.learning.learner.updates == updates and ranking(services, QUERIES[1]) == before
    assert len(await feedback.snapshots.list()) == 0  # nothing stored by a refused restore

    services.snapshots.verify_key = snapshots.load_public_key(public)
    fresh_feedback, fresh = await service(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
    fresh.snapshots.verify_key = services.snapshots.verify_key
    await fresh.snapshots.adopt(loaded, "restore")
    assert ranking(fresh, QUERIES[1]) == before
    await fresh_feedback.aclose()
    await feedback.aclose()


async def test_rollback_goes_back_one_snapshot_at_a_time(url: str) -> None:
    feedback, services = await service(url)
    samples = []
    for i in range(3):
        await teach(services, rounds=2, prefix=f"r{i}-")
        samples.append((await services.snapshots.save("periodic")).sample_count)
    first = await services.snapshots.adopt(await services.snapshots.choose(None, None, True), "rollback")
    assert first.sample_count == samples[1] and services.learning.learner.updates == samples[1]
    second = await services.snapshots.adopt(await services.snapshots.choose(None, None, True), "rollback")
    assert second.sample_count == samples[0] and services.learning.learner.updates == samples[0]
    await feedback.aclose()


class CountingEmbedder:
    """WordLlama, noting every text it is asked to embed."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = WordLlamaEmbedder()
        self.texts: Counter[str] = Counter()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.texts.update(texts)
        return self.inner.embed(texts)


async def test_loading_a_snapshot_does_not_embed_the_catalogues_documents_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documents of the running catalogue are embedded once (with MiniLM the longest wait of a start): not again
    by the snapshot a server loads at start while its first catalogue embeds, nor by a restore."""
    embedder = CountingEmbedder()
    monkeypatch.setattr(learning_core, "load_embedder", lambda kind: embedder)
    feedback, first = await service(url)
    await teach(first, rounds=2)
    saved = await first.snapshots.save("shutdown")
    before = [ranking(first, q) for q in QUERIES]
    await feedback.aclose()

    embedder.texts.clear()
    feedback = FeedbackService(url, flush_interval_ms=1)
    await feedback.start()
    second = Services.open(settings(url), feedback)
    await second.learning.set_tools(TOOLS, first=True)  # listed at once, embedded in a thread: a server's start
    await second.snapshots.load_latest()
    await second.learning.catalogue_taken()
    documents = {second.learning.learner.index.documents[t.name] for t in TOOLS}
    assert {d: embedder.texts[d] for d in documents} == dict.fromkeys(documents, 1)
    assert [ranking(second, q) for q in QUERIES] == before
    await second.snapshots.adopt(saved, "restore")
    assert {d: embedder.texts[d] for d in documents} == dict.fromkeys(documents, 1)  # nor by a restore
    assert [ranking(second, q) for q in QUERIES] == before
    await feedback.aclose()


class GatedVerify:
    """`snapshots.verify`, except that once `armed` it waits (in whatever thread loads the snapshot) until
    `release` is set, as decoding a large state keeps that thread busy; `events` says what happened."""

    def __init__(self, events: list[str]) -> None:
        self.inner, self.events = snapshots.verify, events
        self.armed, self.entered, self.release = threading.Event(), threading.Event(), threading.Event()

    def __call__(self, record: Any, key: Any) -> None:
        if self.armed.is_set() and not self.release.is_set():
            self.entered.set()
            self.release.wait(timeout=5)  # bounded: loaded on the event loop, it holds the loop this long
            self.events.append("restored state loaded")
        self.inner(record, key)


async def test_a_restore_loads_off_the_event_loop_and_learns_the_calls_noted_meanwhile_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    gate = GatedVerify(events)
    monkeypatch.setattr(snapshots, "verify", gate)
    feedback, services = await service(url)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    await teach(services, rounds=2, prefix="later-")  # what the restore takes back
    gate.armed.set()
    restoring = asyncio.create_task(services.snapshots.adopt(saved, "restore"))
    async with asyncio.timeout(10):
        while not gate.entered.is_set():
            await asyncio.sleep(0.01)
    noted = proxied(services, "meanwhile", "git__git_log")
    events.append("call noted")
    draining = asyncio.create_task(services.learning.drain())
    await asyncio.sleep(0.2)
    assert not draining.done() and services.learning.pending == 1  # the call waits for the restored state
    gate.release.set()
    await restoring
    await draining
    assert events == ["call noted", "restored state loaded"]  # the event loop never waited on the load
    assert services.learning.learner.updates == saved.sample_count + 1  # learned into the restored state
    assert await services.sharing.sync() == 0  # and not again from the log
    assert services.learning.learner.updates == saved.sample_count + 1
    stored = await feedback.reads.get_execution(noted)
    assert stored is not None and stored.reward is not None  # recorded, with what it was learned with
    await feedback.aclose()


async def test_an_instance_adopts_a_restore_another_process_made(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    await teach(services, rounds=2, prefix="later-")
    other_feedback, other = await service(url)
    await other.snapshots.follow_restores()
    assert other.learning.learner.updates == 0  # a snapshot taken is no restore
    await services.snapshots.adopt(saved, "restore")
    await other.snapshots.follow_restores()
    assert other.learning.learner.updates == saved.sample_count
    assert ranking(other, QUERIES[1]) == ranking(services, QUERIES[1])
    await other_feedback.aclose()
    await feedback.aclose()


async def test_an_instance_counts_the_calls_it_served_not_those_of_the_snapshot_it_loads(url: str) -> None:
    """`calls` and `decisions` (get_learning_stats, an instance's row in `inspect status`) are this instance's:
    a start that loaded a snapshot, or a restore of one (from another namespace, another instance), reported
    the calls of the instance that saved it as its own (one that served 5 calls showed 25)."""
    feedback, first = await service(url)
    await first.snapshots.restore_latest()
    await teach(first, rounds=3)
    saved = await first.snapshots.save("shutdown")
    served = await learning_stats(first)
    assert (served.calls, served.decisions) == (9, 9)
    await feedback.aclose()

    feedback, second = await service(url)
    await second.snapshots.restore_latest()
    await call(second, "only", QUERIES[2], "time__get_current_time")
    stats = await learning_stats(second)
    assert (stats.calls, stats.decisions, stats.updates) == (1, 1, served.updates + 1)
    await second.snapshots.adopt(saved, "restore")
    stats = await learning_stats(second)
    assert (stats.calls, stats.decisions, stats.updates) == (1, 1, served.updates)
    await feedback.aclose()


async def test_snapshots_beyond_keep_are_dropped(url: str) -> None:
    feedback, services = await service(url, snapshot_keep=2)
    for _ in range(4):
        await services.snapshots.save("manual")  # asked for: stored though the state is the same
    assert [s.id for s in await feedback.snapshots.list()] == [4, 3]
    await feedback.aclose()


async def test_shadow_mode_serves_the_lexical_baseline_while_learning(url: str) -> None:
    feedback, shadow = await service(url, shadow=True)
    baseline = shadow.learning.learner.recommend(QUERIES[1], shadow.learning.state.rng, baseline=True, top_k=4)
    await teach(shadow, rounds=10)
    assert shadow.learning.learner.updates > 0 and shadow.learning.serving == "baseline (shadow mode)"
    served = await shadow.agent.recommend(shadow.learning.sessions.get("x"), QUERIES[1], 4, None)
    assert served.policy == "baseline" and not served.explored
    assert [r.tool for r in served.ranked] == [r.tool for r in baseline.ranked]
    await feedback.aclose()


async def test_shields_drop_a_failing_tool_from_recommendations(url: str) -> None:
    feedback, services = await service(url, shield_min_calls=3, shield_failure_rate=0.5)
    for i in range(4):
        await call(services, f"f{i}", QUERIES[0], "git__git_diff", ok=False)
    assert "git__git_diff" in services.learning.shields.blocked(0.0)
    tools = [
        r.tool
        for r in (
            await services.agent.recommend(services.learning.sessions.get("y"), "show differences", 4, None)
        ).ranked
    ]
    assert "git__git_diff" not in tools and tools
    only = await services.agent.recommend(services.learning.sessions.get("y"), "show differences", 4, ["git__git_diff"])
    assert only.chosen == "git__git_diff"  # asked for by name and nothing else: still answered
    await feedback.aclose()


def test_shield_windows_slide_and_judge_p95_latency() -> None:
    shields = Shields(Budget(max_failure_rate=0.5, max_p95_latency_ms=100.0, window=4, min_calls=4))
    for ok in (False, False, False, True):
        shields.observe("a", ok, 10.0, now=0.0)
    assert shields.blocked(0.0)["a"] == "failure rate 75% over the last 4 calls (budget 50%)"
    for _ in range(2):
        shields.observe("a", True, 10.0, now=1.0)
    assert "a" not in shields.blocked(1.0), "old failures slid out of the window: 1 in the last 4"
    for latency in (20.0, 30.0, 40.0, 200.0):
        shields.observe("b", True, latency, now=2.0)
    assert shields.blocked(2.0)["b"] == "p95 latency 176 ms over the last 4 calls (budget 100 ms)"


async def test_capability_flags_turn_learning_parts_off(url: str) -> None:
    feedback, services = await service(url, learning=False)
    await teach(services, rounds=2)
    assert services.learning.learner.updates == 0 and await feedback.reads.count_executions() == 6
    await feedback.aclose()
    feedback, services = await service(url, sequences=False, policy="ucb", replay=False)
    await teach(services, rounds=4)
    assert services.learning.learner.updates > 0 and len(services.learning.learner.replay) == 0
    assert (
        services.learning.learner.recommend_next(["git__git_log"]) == []
        and not services.learning.learner.sequences.table
    )
    await feedback.aclose()


async def test_with_learning_off_a_drain_hands_nothing_to_the_learning_thread(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Learning off, what a drain does of a call is its reward and context hash: on the event loop (no hop
    to the learning thread and back for every few calls), recorded all the same."""
    feedback, services = await service(url, learning=False)
    handed: list[object] = []
    run = services.learning.thread.run

    async def counted(work: Any) -> Any:
        handed.append(work)
        return await run(work)

    monkeypatch.setattr(services.learning.thread, "run", counted)
    ids = [await call(services, "s0", q, "git__git_log", ok=ok) for q, ok in ((QUERIES[1], True), (QUERIES[0], False))]
    assert handed == [] and services.learning.learner.updates == 0
    recorded = [await feedback.reads.get_execution(i) for i in ids]
    assert [(e.reward, len(e.context_hash or "")) for e in recorded if e is not None] == [(9.998, 64), (-5.002, 64)]
    await feedback.aclose()


def test_watermark_waits_for_late_commits_then_steps_over_holes() -> None:
    mark = Watermark()
    for n in (1, 2, 4, 5):
        mark.add(n)
    mark.advance(now=0.0, grace_s=10)
    assert mark.floor == 2 and mark.fresh(3) and not mark.fresh(4)
    mark.advance(now=5.0, grace_s=10)
    assert mark.floor == 2  # 3 may still commit
    mark.add(3)
    mark.advance(now=6.0, grace_s=10)
    assert mark.floor == 5 and not mark.seen
    mark.add(8)
    mark.advance(now=7.0, grace_s=10)
    mark.advance(now=17.5, grace_s=10)
    assert mark.floor == 8  # 6 and 7 were rolled back


def test_watermark_passes_other_namespaces_ids_at_once_and_every_hole_found_together_after_the_grace() -> None:
    mark = Watermark()
    mark.add(2)
    mark.advance(now=0.0, grace_s=10, others=[1, 3, 4, 6, 9])
    assert mark.floor == 4 and mark.fresh(5) and not mark.seen  # 5 may still commit; 6 and 9 are not kept
    mark.advance(now=5.0, grace_s=10, others=[6, 9])
    assert mark.floor == 4
    mark.advance(now=10.5, grace_s=10, others=[6, 9, 12])
    assert mark.floor == 9  # 5, 7 and 8, handed out before 9 was read, were rolled back
    assert mark.fresh(10) and mark.fresh(11)  # found later: their own grace


async def test_a_database_made_before_migrations_is_stamped_and_upgraded(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # the schema as `create_all` made it before Alembic
        conn.executescript(
            """
            CREATE TABLE executions (seq INTEGER PRIMARY KEY, id VARCHAR(36) UNIQUE NOT NULL,
              namespace VARCHAR(64) NOT NULL, session_id VARCHAR(128) NOT NULL, tool VARCHAR(128) NOT NULL,
              server VARCHAR(128) NOT NULL, argument_digest VARCHAR(64) NOT NULL, arguments JSON,
              context_hash VARCHAR(64), query TEXT, previous_tool VARCHAR(128), position INTEGER NOT NULL,
              decision_id VARCHAR(36), propensity FLOAT, success BOOLEAN NOT NULL, error_type VARCHAR(128),
              error_message TEXT, latency_ms FLOAT NOT NULL, result_size INTEGER NOT NULL, reward FLOAT,
              started_at DATETIME NOT NULL, finished_at DATETIME NOT NULL);
            CREATE TABLE ratings (id INTEGER PRIMARY KEY, execution_id VARCHAR(36) NOT NULL REFERENCES executions(id),
              rating INTEGER NOT NULL, comment TEXT, created_at DATETIME NOT NULL);
            CREATE TABLE episodes (id VARCHAR(36) PRIMARY KEY, namespace VARCHAR(64) NOT NULL,
              session_id VARCHAR(128) NOT NULL, tools JSON NOT NULL, total_reward FLOAT NOT NULL,
              outcome VARCHAR(16) NOT NULL, started_at DATETIME NOT NULL, ended_at DATETIME NOT NULL);
            INSERT INTO executions VALUES (1, 'e1', 'default', 's', 'git__git_log', 'git', 'd', NULL, NULL,
              'history', NULL, 0, NULL, NULL, 1, NULL, NULL, 12.0, 0, 10.0,
              '2026-01-01 00:00:00', '2026-01-01 00:00:01');
            """
        )
    url = f"sqlite+aiosqlite:///{db}"
    feedback, services = await service(url)
    assert await revision(feedback.engine) == head()
    await services.snapshots.restore_latest()
    assert services.learning.learner.updates == 1  # the old log is learned from
    [old] = await feedback.reports.get_recent_executions()
    assert old.id == "e1" and old.instance is None
    await feedback.aclose()


async def test_two_instances_on_postgresql_learn_together(pg_url: str) -> None:
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    feedback_a, a = await service(pg_url, namespace=namespace)
    feedback_b, b = await service(pg_url, namespace=namespace)
    await a.snapshots.restore_latest()
    await b.snapshots.restore_latest()
    await teach(a, rounds=8)
    await feedback_a.flush()
    learned = await b.sharing.sync()
    assert learned == a.learning.learner.updates  # every execution and rating of A, once
    assert await b.sharing.sync() == 0
    assert b.learning.learner.sequences.table == a.learning.learner.sequences.table
    await teach(b, rounds=2, prefix="from-b")
    await feedback_b.flush()
    assert await a.sharing.sync() == b.learning.learner.updates - learned
    assert a.learning.learner.updates == b.learning.learner.updates
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_retention_prunes_only_what_a_snapshot_holds_and_loses_nothing_learned(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=4, prefix="old")
    await feedback.flush()
    await services.sharing.sync()  # own rows seen in the log: the snapshot's watermark covers them
    snapshot = await services.snapshots.save("periodic")
    await teach(services, rounds=2, prefix="new")
    learned = services.learning.learner.updates
    floor = snapshot.covered["executions"]["floor"]
    assert floor == 12
    deleted = await feedback.log.prune(utcnow() + timedelta(seconds=1), max_seq=floor, batch=5)
    assert deleted == 12 and await feedback.reads.count_executions() == 6
    await feedback.aclose()

    feedback, restarted = await service(url)
    await restarted.snapshots.restore_latest()
    assert restarted.learning.learner.updates == learned  # the pruned part lives on in the snapshot
    await feedback.aclose()


async def test_a_start_with_a_snapshot_replays_only_the_tail(url: str) -> None:
    feedback, first = await service(url)
    await teach(first, rounds=6, prefix="early")
    await first.sharing.sync()  # as a server's upkeep does: its own entries now sit below the watermark
    await first.snapshots.save("periodic")
    await teach(first, rounds=2, prefix="late")  # 6 executions and 4 ratings after the snapshot
    await feedback.flush()
    await feedback.aclose()

    feedback, second = await service(url)
    read: list[int] = []
    iter_log_columns = feedback.reads.iter_log_columns

    async def counted(**kwargs: Any) -> AsyncIterator[Any]:
        async for batch in iter_log_columns(**kwargs):
            read.extend(batch.seq)
            yield batch

    feedback.reads.iter_log_columns = counted  # type: ignore[method-assign,assignment]  # a counting spy in its place
    await second.snapshots.load_latest()
    assert second.learning.catching_up and "catching up" in second.learning.serving
    decision = await second.agent.recommend(second.learning.sessions.get("meanwhile"), QUERIES[1], 3, None)
    assert not decision.explored  # while catching up, the prior answers (no exploration on a lagging state)
    learned = await second.sharing.catch_up()
    assert not second.learning.catching_up and second.learning.progress.total == 6 and len(read) == 6
    assert learned == 6 + 4
    await feedback.aclose()


async def test_a_long_replay_stores_snapshots_by_row_count(url: str) -> None:
    feedback, first = await service(url)
    await teach(first, rounds=10)  # 30 executions, never snapshotted
    await feedback.aclose()
    feedback, second = await service(url)
    await second.snapshots.load_latest()
    await second.snapshots.catch_up(snapshot_rows=8)  # checked after each batch read (here: the whole log)
    assert [s.source for s in await feedback.snapshots.list()] == ["periodic"]
    await feedback.aclose()
    feedback, third = await service(url)
    await third.snapshots.load_latest()
    assert await third.sharing.catch_up() == 20  # a start cut short now would begin after the snapshot: ratings only
    assert third.learning.progress.total == 0
    await feedback.aclose()
