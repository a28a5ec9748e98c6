"""Opening a database: one at the newest schema without running Alembic, one Alembic cannot migrate
refused with its reason."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text

from tests.feedback.conftest import make_execution
from toolwise.feedback import DatabaseUnusableError, FeedbackService
from toolwise.feedback.export import execution_chunks
from toolwise.feedback.migrate import HEAD, alembic_config, head

WAIT_S = 30.0  # a driver that waits for ever fails the test here, not hangs it


def test_the_revision_opened_without_alembic_is_the_newest_migration() -> None:
    assert head() == HEAD


OPEN = (
    "import asyncio, sys\nfrom toolwise.feedback import FeedbackService\n"
    "async def main() -> None:\n    async with FeedbackService(sys.argv[1]):\n        pass\n"
    "asyncio.run(main())\nprint('alembic' in sys.modules)"
)


def alembic_imported(url: str) -> bool:
    """Whether a fresh interpreter (this one has imported Alembic) that opened the database imported it."""
    done = subprocess.run([sys.executable, "-c", OPEN, url], capture_output=True, text=True, timeout=120, check=True)
    return done.stdout.strip() == "True"


def test_a_database_at_the_newest_schema_opens_without_importing_alembic(tmp_path: Path) -> None:
    """Alembic (its import, environment and script scan) is paid only to migrate, not on every start and CLI
    command: made by the first opening, the database opens after it on one query of `alembic_version`."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    assert [alembic_imported(url), alembic_imported(url)] == [True, False]


def test_a_postgresql_database_at_the_newest_schema_opens_without_importing_alembic(pg_url: str) -> None:
    alembic_imported(pg_url)  # brought to the newest schema, if it was not
    assert not alembic_imported(pg_url)


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


async def test_times_stored_in_the_older_sqlite_text_form_are_bounded_by_the_clock_after_the_upgrade(
    tmp_path: Path,
) -> None:
    """Before 0008, a dead letter put back (and ratings, episodes) stored its time as "…SS.ffffff", the writer
    as "…SS.ffffff+00:00": compared as text, an export from exactly that time left the row out."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    finished = datetime(2026, 11, 1, 12, 0, 0, 250000, tzinfo=UTC)
    async with FeedbackService(url) as service:
        for i, at in enumerate((finished, finished.replace(microsecond=0))):
            execution = make_execution(f"t__{i}")
            execution.started_at, execution.finished_at = at - timedelta(seconds=1), at
            await service.log.record_execution(execution)
        await service.flush()
        async with service.engine.begin() as conn:
            await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0007"))
            await conn.execute(
                text("UPDATE executions SET finished_at = strftime('%Y-%m-%d %H:%M:%f000', finished_at)")
            )
    async with FeedbackService(url) as service:
        async with service.engine.connect() as conn:
            stored = (await conn.execute(text("SELECT finished_at FROM executions ORDER BY seq"))).scalars().all()
        since = [chunk async for chunk in execution_chunks(service.engine, since=finished)]
    assert [json.loads(line)["tool"] for _, text_ in since for line in text_.splitlines()] == ["t__0"]
    assert stored == ["2026-11-01 12:00:00.250000+00:00", "2026-11-01 12:00:00+00:00"]


@pytest.mark.parametrize(
    ("driver", "query", "waited"),
    [
        ("asyncpg", "", "within 0.5 s"),
        ("psycopg", "", "within 2 s"),  # libpq's whole seconds, 2 at least
        ("psycopg", "?connect_timeout=3", "in time"),  # the URL's own wait, not toolwise's
    ],
    ids=["asyncpg", "psycopg", "psycopg, the URL's wait"],
)
async def test_a_postgresql_server_that_never_answers_is_refused_naming_it_and_the_wait(
    driver: str, query: str, waited: str
) -> None:
    """A port that takes the connection and says nothing (a stopped server behind a proxy, a firewall's tarpit):
    asyncpg's own wait is 60 s and its error a bare `TimeoutError`, so a start hung a minute and said nothing;
    psycopg's (libpq's) is for ever. Each driver SQLAlchemy takes as async is bounded alike; a URL that sets
    libpq's connect_timeout itself is not said to have waited toolwise's (before: 'within 2 s' after 3 s)."""
    pytest.importorskip(driver)
    silent = await asyncio.start_server(lambda reader, writer: None, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    url = f"postgresql+{driver}://toolwise:secret@127.0.0.1:{port}/toolwise{query}"
    async with silent:
        with pytest.raises(DatabaseUnusableError) as raised:
            async with asyncio.timeout(WAIT_S):
                async with FeedbackService(url, connect_timeout_s=0.5):
                    pass
    said = str(raised.value)
    assert f"127.0.0.1:{port}" in said and f"did not answer {waited}" in said and "secret" not in said


async def test_a_psycopg_urls_own_options_and_connect_timeout_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A psycopg URL that sets libpq's `options` (a schema: `-c search_path=toolwise`) or `connect_timeout` keeps
    them: toolwise's UTC session is added to them, its wait only where the URL gives none. (Before, toolwise's
    connect arguments replaced the URL's: the tables went to the default schema.)"""
    psycopg = pytest.importorskip("psycopg")
    asked: list[dict[str, object]] = []

    async def connect(*args: object, **kwargs: object) -> object:
        asked.append(kwargs)
        raise OSError("no server here")

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", connect)
    url = "postgresql+psycopg://toolwise@127.0.0.1:1/toolwise?options=-c%20search_path%3Dtoolwise&connect_timeout=7"
    with pytest.raises(DatabaseUnusableError):
        async with asyncio.timeout(WAIT_S):
            async with FeedbackService(url, connect_timeout_s=0.5):
                pass
    assert asked
    options = str(asked[0]["options"])
    assert "search_path=toolwise" in options and "TimeZone=UTC" in options
    assert str(asked[0]["connect_timeout"]) == "7"
