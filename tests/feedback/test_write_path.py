"""One write path: on an SQLite file every write (executions, ratings, rewards, episodes, snapshots,
heartbeats, retention) is made by the one thread that commits the executions' batches, so no second
connection of ours waits on its write lock."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import event

from tests.feedback.conftest import make_execution, rerated
from toolwise.feedback import Episode, FeedbackService, utcnow
from toolwise.feedback.records import InstanceStatus, SnapshotRecord

WRITES = ("INSERT", "UPDATE", "DELETE")


async def test_on_sqlite_every_write_goes_through_the_one_writing_thread(service: FeedbackService) -> None:
    seen: list[str] = []

    def note(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(WRITES):
            seen.append(" ".join(statement.split()[:3]))

    event.listen(service.engine.sync_engine, "before_cursor_execute", note)
    now = utcnow()
    execution_id = await service.log.record_execution(make_execution())
    await service.log.add_rating(execution_id, 4, rerate=rerated, unrated=lambda _: 1.5)  # its reward moved with it
    await service.log.record_episode(Episode("s1", ["time__get_current_time"], 1.5, "success", now, now))
    snapshot = SnapshotRecord("default", "1.0.0", "linucb", "manual", now, 1, {}, "0" * 64, b"state")
    await service.snapshots.save(snapshot, keep=1)
    await service.instances.heartbeat(InstanceStatus("i1", "default", "host", 1, now, now, {}))
    await service.instances.heartbeat(InstanceStatus("i1", "default", "host", 1, now, now, {"ok": True}))
    deleted = await service.log.prune(now + timedelta(days=1), max_seq=10)
    assert deleted == 1
    assert [i.status for i in await service.instances.list()] == [{"ok": True}]
    assert len(await service.snapshots.list()) == 1
    assert seen == [], f"writes through the async engine, beside the writing thread: {seen}"
