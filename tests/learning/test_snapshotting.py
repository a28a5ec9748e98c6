"""A restore is the state an instance ends with, whatever ran beside it: a restore made here while the
upkeep follows another process's restore, or made while the start-up's replay of the log is under way.
In-process against a real SQLite file, the services as the server runs them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_persistence import service, teach
from toolwise.feedback.records import SnapshotRecord

SETTLE_S = 2.0  # how long a restore started beside another is given to run (it waits for the other, once mended)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_restore_made_here_is_not_undone_by_following_an_older_one(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=2)
    older = await services.snapshots.save("manual")
    await teach(services, rounds=2, prefix="later-")
    wanted = await services.snapshots.save("manual")
    assert wanted.sample_count > older.sample_count
    await services.snapshots.adopt(older, "restore")  # another process's restore, for `other` to follow

    other_feedback, other = await service(url)
    get = other_feedback.snapshots.get
    restoring: list[asyncio.Task[SnapshotRecord]] = []

    async def read_while_restoring(*args: Any, **kwargs: Any) -> SnapshotRecord | None:
        """The admin restores `wanted` here while the upkeep reads the older restore it follows."""
        if not restoring:
            restoring.append(asyncio.create_task(other.snapshots.adopt(wanted, "restore")))
            await asyncio.wait(restoring, timeout=SETTLE_S)
        return await get(*args, **kwargs)

    other_feedback.snapshots.get = read_while_restoring  # type: ignore[method-assign]  # the interleaving
    await other.snapshots.follow_restores()
    await restoring[0]
    newest = (await other_feedback.snapshots.list())[0]
    assert newest.source == "restore" and newest.sample_count == wanted.sample_count
    assert other.learning.learner.updates == wanted.sample_count  # the state is the restore the admin made
    await other_feedback.aclose()
    await feedback.aclose()
