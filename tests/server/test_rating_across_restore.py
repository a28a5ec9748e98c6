"""A rating committed while a restore is under way is learned once, as docs/reference.md promises of a restore:
the restored state is the snapshot's learning as of the moment the restore reads the log (what was committed
before counts as covered, not learned on top), and what comes after is learned into it once. The rating is
held between its commit and its learning (`rated_with`), the restore around it, in either order."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_learned_once import rated_with
from tests.server.test_persistence import service
from toolwise.feedback.records import SnapshotRecord


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_rating_committed_before_a_restore_and_learned_after_it_is_not_learned_on_top(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(url)
    snapshot = await services.snapshots.save("manual")
    restored: list[int] = []

    async def restore() -> None:
        await services.snapshots.adopt(snapshot, "restore")
        restored.append(services.learning.learner.updates)

    await rated_with(services, monkeypatch, restore)
    # committed before the restore read the log: covered, so not learned into the restored state, by it or a sync
    assert services.learning.learner.updates == restored[0] == snapshot.sample_count
    assert await services.sharing.sync() == 0 and services.learning.learner.updates == restored[0]
    monkeypatch.undo()  # the next rating restores nothing meanwhile
    session = services.learning.sessions.get("s")
    await services.agent.rate(session, 5, None, "git__git_log", None)  # after the restore: learned once
    assert services.learning.learner.updates == restored[0] + 1
    assert await services.sharing.sync() == 0 and services.learning.learner.updates == restored[0] + 1
    await feedback.aclose()


async def test_a_rating_learned_while_a_restore_is_loading_its_state_is_not_learned_again_into_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(url)
    snapshot = await services.snapshots.save("manual")
    load = services.snapshots.load
    reached, go = asyncio.Event(), asyncio.Event()

    async def held_load(record: SnapshotRecord, *, covered: dict[str, Any] | None = None) -> None:
        reached.set()  # the restore has read the log's marks; its state is not swapped in yet
        await go.wait()
        await load(record, covered=covered)

    monkeypatch.setattr(services.snapshots, "load", held_load)
    restoring: list[asyncio.Future[SnapshotRecord]] = []

    async def restore_begun() -> None:
        restoring.append(asyncio.ensure_future(services.snapshots.adopt(snapshot, "restore")))
        await reached.wait()

    assert await rated_with(services, monkeypatch, restore_begun) == 1  # into the state being replaced
    go.set()
    await restoring[0]
    assert services.learning.learner.updates == snapshot.sample_count
    assert await services.sharing.sync() == 0 and services.learning.learner.updates == snapshot.sample_count
    await feedback.aclose()
