"""Opening a database: one at the newest schema without running Alembic, one Alembic cannot migrate
refused with its reason."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text

from toolwise.feedback import DatabaseUnusableError, FeedbackService
from toolwise.feedback.migrate import HEAD, alembic_config, head


def test_the_revision_opened_without_alembic_is_the_newest_migration() -> None:
    assert head() == HEAD


async def test_a_database_from_a_newer_toolwise_is_refused_naming_its_revision(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'newer.db'}"
    async with FeedbackService(url) as service, service.engine.begin() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(DatabaseUnusableError, match="9999"):
        async with FeedbackService(url):
            pass
    async with FeedbackService(url.replace("newer", "fresh")) as fresh, fresh.engine.connect() as conn:
        assert await conn.scalar(text("SELECT version_num FROM alembic_version")) == HEAD


async def test_a_migration_that_ran_is_one_line_naming_the_revisions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What toolwise logs of its schema, whatever the CLI does with Alembic's own lines: made, upgraded, or nothing."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    with caplog.at_level(logging.INFO, logger="toolwise.feedback.migrate"):
        async with FeedbackService(url) as service, service.engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0005"))
        async with FeedbackService(url):
            pass
        async with FeedbackService(url):
            pass
    said = [r.getMessage() for r in caplog.records if r.name == "toolwise.feedback.migrate"]
    assert said == [f"database schema created at {HEAD}", f"database schema upgraded from 0005 to {HEAD}"]
