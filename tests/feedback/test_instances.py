"""The instance registry keeps what `inspect status` and the dashboard read, not a row per start ever made:
a stdio client starts toolwise once per session, so the table grew by hundreds of rows a month for ever."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from sqlalchemy import delete

from tests.server.surface import running
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.instances import KEEP_GONE, STALE_AFTER_S
from toolwise.feedback.records import InstanceStatus
from toolwise.feedback.schema import InstanceRow

WAIT_S = 10.0


@pytest.fixture(params=["sqlite", "postgresql"])
async def registry(request: pytest.FixtureRequest, db_url: str) -> AsyncIterator[FeedbackService]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else db_url
    async with FeedbackService(url) as feedback:
        async with feedback.engine.begin() as conn:  # a shared server's database: this test's rows alone
            await conn.execute(delete(InstanceRow).where(InstanceRow.namespace.in_(["default", "team"])))
        yield feedback


async def test_pruning_keeps_every_running_instance_and_only_the_newest_gone_ones(registry: FeedbackService) -> None:
    service, now = registry, utcnow()
    await service.instances.heartbeat(InstanceStatus("alive", "default", "host", 1, now - timedelta(days=90), now, {}))
    gone = []
    for n in range(KEEP_GONE + 20):
        heard = now - timedelta(hours=1 + n)
        stopped = heard if n % 3 else None  # every third killed: no stopped_at, silent since (stale)
        gone.append(f"gone{n:03d}")
        await service.instances.heartbeat(
            InstanceStatus(gone[-1], "default", "host", 100 + n, heard - timedelta(minutes=5), heard, {}, stopped)
        )
    other = now - timedelta(days=400)
    await service.instances.heartbeat(InstanceStatus("elsewhere", "team", "host", 9, other, other, {}, other))

    assert await service.instances.prune("default") == 20
    kept = [i.id for i in await service.instances.list("default")]
    assert kept == ["alive", *gone[:KEEP_GONE]]  # the newest gone ones, as `inspect status` lists them
    assert [i.id for i in await service.instances.list("team")] == ["elsewhere"]  # another namespace's own
    assert await service.instances.prune("default") == 0
    assert STALE_AFTER_S < 3600  # the stale ones above are past it: pruned as gone, not kept as running


async def test_a_start_prunes_the_rows_earlier_starts_left(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"  # the file `running` serves from
    then = utcnow() - timedelta(days=3)
    async with FeedbackService(url) as feedback:
        for n in range(KEEP_GONE + 10):
            ended = then - timedelta(minutes=n)
            await feedback.instances.heartbeat(
                InstanceStatus(f"old{n:03d}", "default", "h", n, ended, ended, {}, ended)
            )
    async with running(tmp_path) as (app, _):
        with anyio.fail_after(WAIT_S):
            while len(await app.feedback.instances.list("default")) > KEEP_GONE + 1:
                await anyio.sleep(0.05)
        ids = [i.id for i in await app.feedback.instances.list("default")]
    assert ids == [app.learning.instance_id, *(f"old{n:03d}" for n in range(KEEP_GONE))]
