from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest

from tests.feedback.conftest import make_execution, ratings_of, rerated
from toolwise.feedback import (
    Episode,
    Execution,
    FeedbackService,
    InvalidOutcomeError,
    InvalidRatingError,
    UnknownExecutionError,
    argument_digest,
    utcnow,
)
from toolwise.feedback.records import SnapshotRecord


def count_rows(url: str) -> int:
    path = url.split("///", 1)[1]
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM executions").fetchone()[0])


async def test_execution_round_trips_with_every_field(service: FeedbackService) -> None:
    sent = make_execution(
        "git__git_status",
        arguments={"repo_path": "/tmp/r"},
        namespace="team-a",
        context_hash="c" * 64,
        query="what changed",
        previous_tool="git__git_log",
        position=3,
        decision_id="d1",
        propensity=0.25,
        success=False,
        error_type="TimeoutError",
        error_message="slow",
        result_size=42,
        reward=-5.2,
        instance="instance-1",
        explored=True,
    )
    execution_id = await service.log.record_execution(sent)
    got = await service.reads.get_execution(execution_id)
    assert got is not None
    # Every field of the record, a new one included, unless the store transforms it (checked below).
    transformed = {"arguments", "argument_digest", "seq"}
    for field in (f.name for f in dataclasses.fields(Execution) if f.name not in transformed):
        assert getattr(got, field) == getattr(sent, field), field
    assert got.argument_digest == service.rows.digest({"repo_path": "/tmp/r"})
    assert got.arguments is None, "raw arguments are not stored unless configured"
    assert got.seq is not None


async def test_stored_arguments_are_redacted(db_url: str) -> None:
    async with FeedbackService(db_url, store_arguments=True) as svc:
        args = {"url": "https://x", "api_key": "abc", "nested": {"Password": "p", "n": 1}}
        execution_id = await svc.log.record_execution(make_execution(arguments=args))
        got = await svc.reads.get_execution(execution_id)
    assert got is not None
    assert got.arguments == {"url": "https://x", "api_key": "***", "nested": {"Password": "***", "n": 1}}
    assert got.argument_digest == svc.rows.digest(args), "the digest is of the real arguments"


async def test_digest_ignores_key_order() -> None:
    assert argument_digest({"a": 1, "b": [1, 2]}) == argument_digest({"b": [1, 2], "a": 1})
    assert argument_digest({"a": 1}) != argument_digest({"a": 2})


@pytest.mark.parametrize("bad", [0, 6, -1, 3.5, True, "4", None])
async def test_rating_outside_one_to_five_is_refused(service: FeedbackService, bad: object) -> None:
    execution_id = await service.log.record_execution(make_execution())
    with pytest.raises(InvalidRatingError, match="rating must be an integer from 1 to 5"):
        await service.log.add_rating(execution_id, bad)  # type: ignore[arg-type]
    assert await ratings_of(service, execution_id) == []


async def test_rating_of_unknown_execution_is_refused(service: FeedbackService) -> None:
    with pytest.raises(UnknownExecutionError, match="no-such-id"):
        await service.log.add_rating("no-such-id", 4)


async def test_rating_is_committed_for_a_just_recorded_execution(service: FeedbackService) -> None:
    execution_id = await service.log.record_execution(make_execution())
    rated = await service.log.add_rating(execution_id, 5, "spot on")
    assert rated.execution.id == execution_id and rated.previous is None
    [rating] = await ratings_of(service, execution_id)
    assert (rating.rating, rating.comment) == (5, "spot on")
    assert rating == rated.rating
    again = await service.log.add_rating(execution_id, 2)
    assert again.previous == 5 and again.rating.id > rated.rating.id  # type: ignore[operator]


async def test_a_rating_moves_the_stored_reward_in_its_commit(service: FeedbackService) -> None:
    execution_id = await service.log.record_execution(make_execution(reward=9.9))
    await service.log.add_rating(execution_id, 5, rerate=rerated, unrated=lambda _: 0.0)
    got = await service.reads.get_execution(execution_id)
    assert got is not None and got.reward == pytest.approx(13.9)  # its reward moved, not replaced
    cancelled = await service.log.record_execution(make_execution(success=False, error_type="CallCancelledError"))
    rated = await service.log.add_rating(cancelled, 1, rerate=rerated, unrated=lambda _: -5.0)
    assert rated.execution.reward == -5.0 and rated.rewarded is None
    got = await service.reads.get_execution(cancelled)
    assert got is not None and got.reward == pytest.approx(-9.0)  # a call never rewarded: its first, rated


async def test_tool_metrics_match_hand_computed_figures(service: FeedbackService) -> None:
    # tool a: latencies 10, 20, …, 200 ms; 15 of 20 succeed; ratings 4 and 2 on two calls.
    ids = []
    for i in range(20):
        ids.append(
            await service.log.record_execution(make_execution("s__a", latency_ms=10.0 * (i + 1), success=i < 15))
        )
    await service.log.add_rating(ids[0], 4)
    await service.log.add_rating(ids[1], 2)
    await service.log.record_execution(make_execution("s__b", latency_ms=7.0))

    metrics = {m.tool: m for m in await service.reports.get_tool_metrics()}
    a, b = metrics["s__a"], metrics["s__b"]
    assert a.calls == 20
    assert a.success_rate == pytest.approx(0.75)
    assert a.avg_latency_ms == pytest.approx(105.0)
    assert a.p95_latency_ms == pytest.approx(190.0, rel=0.01)  # nearest rank: ceil(0.95·20) = 19th value, ±1%
    assert a.avg_rating == pytest.approx(3.0) and a.ratings == 2
    assert (b.calls, b.success_rate, b.avg_rating, b.ratings) == (1, 1.0, None, 0)
    assert b.p95_latency_ms == pytest.approx(7.0, rel=0.01)
    assert a.last_used.tzinfo is not None
    assert [m.tool for m in await service.reports.get_tool_metrics("s__b")] == ["s__b"]


async def test_reads_see_executions_recorded_just_before(service: FeedbackService) -> None:
    await service.log.record_execution(make_execution("s__a", session_id="x"))
    await service.log.record_execution(make_execution("s__b", session_id="x"))
    recent = await service.reports.get_recent_executions()
    assert [e.tool for e in recent] == ["s__b", "s__a"]


@pytest.mark.parametrize("count", [20, 21])  # the last batch part-full, and exactly full
async def test_the_log_is_read_in_batches_each_entry_once_in_order(service: FeedbackService, count: int) -> None:
    ids = [await service.log.record_execution(make_execution(session_id="s", position=i)) for i in range(count)]
    entries = [e async for batch in service.reads.iter_log(batch=7) for e in batch]
    assert [e.id for e in entries] == ids and [e.position for e in entries] == list(range(count))
    assert [e.seq for e in entries] == sorted({e.seq for e in entries})
    full = [x async for batch in service.reports.iter_executions(after_seq=entries[9].seq, batch=7) for x in batch]
    assert [x.id for x in full] == ids[10:]
    picked = await service.reads.executions_by_seq([entries[12].seq, entries[3].seq])
    assert [x.id for x in picked] == [ids[3], ids[12]]


async def test_ten_thousand_concurrent_executions_from_fifty_tasks_are_all_kept(db_url: str) -> None:
    async with FeedbackService(db_url, max_queue=500) as svc:

        async def producer(worker: int) -> list[str]:
            return [await svc.log.record_execution(make_execution(session_id=f"w{worker}")) for _ in range(200)]

        ids = [i for batch in await asyncio.gather(*(producer(w) for w in range(50))) for i in batch]
        await svc.flush()
        assert svc.stats.committed == 10_000 and svc.stats.dead_lettered == 0
    assert len(set(ids)) == 10_000
    assert count_rows(db_url) == 10_000


async def test_shutdown_writes_everything_queued(db_url: str) -> None:
    svc = FeedbackService(db_url, flush_interval_ms=10_000, batch_size=4096)
    await svc.start()
    for _ in range(1_000):
        await svc.log.record_execution(make_execution())
    assert count_rows(db_url) == 0, "nothing was due yet: the writer waits for a full batch or the interval"
    await svc.aclose()
    assert count_rows(db_url) == 1_000


async def test_locked_database_loses_nothing_once_it_recovers(db_url: str) -> None:
    async with FeedbackService(db_url, busy_timeout_s=0.01, max_queue=50, batch_size=20) as svc:
        await svc.log.record_execution(make_execution())
        await svc.flush()
        blocker = sqlite3.connect(db_url.split("///", 1)[1], isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")

        async def produce() -> None:
            for _ in range(300):
                await svc.log.record_execution(make_execution())

        producer = asyncio.create_task(produce())
        while svc.stats.failed_batches < 3:
            await asyncio.sleep(0.01)
        assert not producer.done(), "a full queue makes producers wait (back-pressure), it never drops"
        blocker.execute("ROLLBACK")
        blocker.close()

        await producer
        await svc.flush()
        assert svc.stats.dead_lettered == 0
    assert count_rows(db_url) == 301


async def test_record_the_database_refuses_is_dead_lettered_not_dropped(db_url: str, tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    async with FeedbackService(db_url, dead_letter_path=dead, flush_interval_ms=1_000) as svc:
        for _ in range(50):
            await svc.log.record_execution(make_execution())
        poison = make_execution()
        poison.tool = None  # type: ignore[assignment]  # violates NOT NULL: never transient
        await svc.log.record_execution(poison)
        for _ in range(50):
            await svc.log.record_execution(make_execution())
        await svc.flush()
        assert svc.stats.dead_lettered == 1
    assert count_rows(db_url) == 100
    [line] = dead.read_text().splitlines()
    assert json.loads(line)["execution"]["id"] == poison.id


async def test_episode_round_trips_and_outcome_is_validated(service: FeedbackService) -> None:
    now = utcnow()
    await service.log.record_episode(Episode("s1", ["a", "b"], 12.5, "success", now, now))
    [episode] = await service.reports.get_episodes()
    assert (episode.tools, episode.total_reward, episode.outcome) == (["a", "b"], 12.5, "success")
    with pytest.raises(InvalidOutcomeError, match="'great'"):
        await service.log.record_episode(Episode("s1", [], 0.0, "great", now, now))  # type: ignore[arg-type]


async def test_default_database_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("TOOLWISE_DATABASE_URL", url)
    async with FeedbackService() as svc:
        await svc.log.record_execution(make_execution())
    assert svc.url == url and count_rows(url) == 1


async def test_a_stored_snapshot_payload_is_not_kept_in_memory(service: FeedbackService) -> None:
    """A year's snapshot is tens of MB: once stored, the store holds no reference to it (the
    statement cache once kept the first payload for the life of the process)."""
    payload = bytes(range(256)) * 4_000
    snapshot = SnapshotRecord("default", "1.0.0", "semantic", "periodic", utcnow(), 1, {}, "0" * 64, payload)
    held = sys.getrefcount(payload)
    await service.snapshots.save(snapshot, keep=2)
    stored = await service.snapshots.get(namespace="default")
    assert stored is not None and stored.payload == payload
    del snapshot, stored
    gc.collect()
    assert sys.getrefcount(payload) == held - 1  # this test's name alone


async def check_odd_text_is_kept(service: FeedbackService, namespace: str) -> None:
    """A query, an error message or a comment holding NUL (a downstream's binary output) or half a
    surrogate pair (a JavaScript client that cut a string mid-character) is stored with U+FFFD in their
    place, on every backend: its call is logged, not refused by the database (and lost, as its dead
    letter could not be written either)."""
    cut, binary = "café 😀\ud83d", "read \x00\x01 bytes"
    ids = [
        await service.log.record_execution(make_execution("t__cut", namespace=namespace, query=cut)),
        await service.log.record_execution(
            make_execution("t__bin", namespace=namespace, success=False, error_type="E", error_message=binary)
        ),
        await service.log.record_execution(make_execution("t__ok", namespace=namespace, query="fine")),
    ]
    await service.log.add_rating(ids[2], 4, "good\x00 \udc80")
    stored = [await service.reads.get_execution(i) for i in ids]
    assert [e.tool if e else None for e in stored] == ["t__cut", "t__bin", "t__ok"]
    assert stored[0] is not None and stored[0].query == "café 😀\ufffd"
    assert stored[1] is not None and stored[1].error_message == "read \ufffd\x01 bytes"
    [rated] = [
        e.rating
        async for batch in service.reads.iter_rating_events(namespace=namespace)
        for e in batch.events
        if e.execution.id == ids[2]
    ]
    assert rated.comment == "good\ufffd \ufffd"


async def test_text_no_database_stores_as_it_is_is_kept_on_sqlite(service: FeedbackService) -> None:
    await check_odd_text_is_kept(service, "default")


async def test_text_no_database_stores_as_it_is_is_kept_on_postgresql(pg_url: str) -> None:
    async with FeedbackService(pg_url) as service:
        await check_odd_text_is_kept(service, f"test-{uuid.uuid4().hex[:8]}")


async def check_concurrent_ratings_move_the_reward_in_turn(instances: list[FeedbackService], namespace: str) -> None:
    """Ratings of one call committed at once (by instances sharing the log, or one instance's concurrent
    raters) each move its stored reward from where the one before left it and name that one as the rating
    they replace: none is lost from the reward, from the tool's reward sum, or from the chain another
    instance learns from the log."""
    first = instances[0]
    execution_id = await first.log.record_execution(make_execution("t__rated", namespace=namespace, reward=1.0))
    await first.flush()  # committed, for every instance to read

    def rerate(reward: float, rating: int, previous: int | None) -> float:
        return reward + rating - (previous or 0)

    ratings = [1, 5, 2, 4, 3, 5, 1, 4, 2, 3, 5, 1]
    events = await asyncio.gather(
        *(instances[i % len(instances)].log.add_rating(execution_id, r, rerate=rerate) for i, r in enumerate(ratings))
    )
    events.sort(key=lambda e: e.rating.id or 0)
    in_order = [e.rating.rating for e in events]
    assert [e.previous for e in events] == [None, *in_order[:-1]]
    stored = await first.reads.get_execution(execution_id)
    assert stored is not None and stored.reward == 1.0 + in_order[-1]
    assert await first.reports.mean_reward(namespace) == 1.0 + in_order[-1]


async def test_concurrent_ratings_move_the_reward_in_turn_on_sqlite(db_url: str) -> None:
    async with FeedbackService(db_url) as one, FeedbackService(db_url) as other:
        await check_concurrent_ratings_move_the_reward_in_turn([one, other], "default")


async def test_concurrent_ratings_move_the_reward_in_turn_on_postgresql(pg_url: str) -> None:
    async with FeedbackService(pg_url) as one, FeedbackService(pg_url) as other:
        await check_concurrent_ratings_move_the_reward_in_turn([one, other], f"test-{uuid.uuid4().hex[:8]}")


async def check_odd_text_in_arguments_is_kept(url: str, namespace: str) -> None:
    """A call's arguments holding half a surrogate pair (a JavaScript client that cut a string mid-character)
    or NUL, in a value or a key: its record is logged, with U+FFFD in their place where the arguments are
    stored, and alike arguments digest alike. It was lost: its digest could not encode the text, nor could
    its dead letter ('dead-lettering failed too')."""
    odd = {"text": "cut 😀\ud83d", "bin": "a\x00b", "k\udc80": 1}
    for store in (True, False):
        async with FeedbackService(url, store_arguments=store) as service:
            ids = [
                await service.log.record_execution(make_execution("t__odd", namespace=namespace, arguments=odd))
                for _ in range(2)
            ]
            await service.flush()
            stored = [await service.reads.get_execution(i) for i in ids]
        assert stored[0] is not None and stored[1] is not None, store
        assert stored[0].argument_digest == stored[1].argument_digest
        kept = {"text": "cut 😀\ufffd", "bin": "a\ufffdb", "k\ufffd": 1} if store else None
        assert stored[0].arguments == kept


async def test_odd_text_in_arguments_is_kept_on_sqlite(db_url: str) -> None:
    await check_odd_text_in_arguments_is_kept(db_url, "default")


async def test_odd_text_in_arguments_is_kept_on_postgresql(pg_url: str) -> None:
    await check_odd_text_in_arguments_is_kept(pg_url, f"test-{uuid.uuid4().hex[:8]}")
