"""The SQLite file deleted under a running toolwise: the store says so, and what it is asked to write
meanwhile is kept (dead-lettered at shutdown) instead of vanishing with the deleted file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService


async def test_a_deleted_database_file_is_reported_and_what_follows_is_dead_lettered(tmp_path: Path) -> None:
    db, dead = tmp_path / "toolwise.db", tmp_path / "dead.jsonl"
    url = f"sqlite+aiosqlite:///{db}"
    async with FeedbackService(url, dead_letter_path=dead, flush_interval_ms=5, store_timeout_s=0.5) as svc:
        kept = make_execution()
        await svc.log.record_execution(kept)
        await svc.flush()
        assert svc.stats.failing is None
        db.unlink()  # what a cleanup job or a mistaken `rm` does to a running server's database
        late = make_execution()
        await svc.log.record_execution(late)
        for _ in range(500):
            if svc.stats.failing is not None:
                break
            await asyncio.sleep(0.01)
        assert svc.stats.failing is not None and "was deleted while toolwise ran" in svc.stats.failing
        assert svc.stats.health().startswith("failing since")  # what stats, heartbeat and `inspect status` say
    [line] = dead.read_text().splitlines()
    assert json.loads(line)["execution"]["id"] == late.id  # not lost: written where a person finds it
