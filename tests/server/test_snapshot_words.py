"""What the snapshot tools say they did with a file: a dump writes it, a restore reads it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.learning.sessions import Session
from toolwise.server.services import Services
from toolwise.server.snapshot_tools import SnapshotDumpInput, SnapshotRestoreInput
from toolwise.server.tools import own_tools


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    settings = Settings(database_url=url, seed=1, sync_interval_s=0, snapshot_dir=tmp_path / "snapshots")
    async with FeedbackService(url, flush_interval_ms=1) as feedback:
        yield Services.open(settings, feedback)


async def test_a_restore_from_a_file_says_it_read_the_file_not_that_it_wrote_it(services: Services) -> None:
    tools, session = own_tools(admin=True, snapshots=True), Session("admin")
    dumped = await tools["snapshot_dump"].handler(services, SnapshotDumpInput(output="state.snapshot"), session)
    restored = await tools["snapshot_restore"].handler(services, SnapshotRestoreInput(input="state.snapshot"), session)
    assert dumped.text().endswith("written to state.snapshot")
    assert restored.text().endswith("read from state.snapshot")
