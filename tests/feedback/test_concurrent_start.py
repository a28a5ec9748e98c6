"""Instances started together on a fresh database all come up: the schema is made once, under the
database's own lock, and the others find it made (before, one of them died with "table executions
already exists"). Real processes, released at the same moment, on an SQLite file and on PostgreSQL."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from toolwise.feedback import FeedbackService
from toolwise.feedback.migrate import HEAD

INSTANCES = 4

# One instance: imports everything, waits for the starting gun, then opens the database.
INSTANCE = """
import asyncio, pathlib, sys, time
from toolwise.feedback import FeedbackService
url, gun = sys.argv[1], pathlib.Path(sys.argv[2])
while not gun.exists():
    time.sleep(0.001)
async def main() -> None:
    async with FeedbackService(url):
        pass
asyncio.run(main())
print("up")
"""


def start_together(url: str, folder: Path) -> list[subprocess.CompletedProcess[str]]:
    gun = folder / f"go-{uuid.uuid4().hex[:6]}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", INSTANCE, url, str(gun)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(INSTANCES)
    ]
    time.sleep(2.0)  # every interpreter has imported and waits on the gun
    gun.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


async def assert_at_head(url: str) -> None:
    async with FeedbackService(url) as service, service.engine.connect() as conn:
        assert await conn.scalar(text("SELECT version_num FROM alembic_version")) == HEAD


@pytest.mark.parametrize("round_", range(2))
async def test_instances_started_together_on_a_fresh_sqlite_file_all_come_up(tmp_path: Path, round_: int) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    results = await asyncio.to_thread(start_together, url, tmp_path)
    assert [(r.returncode, r.stdout.strip()) for r in results] == [(0, "up")] * INSTANCES, [
        r.stderr.strip().splitlines()[-8:] for r in results
    ]
    await assert_at_head(url)


@pytest.fixture
async def fresh_pg_database(pg_url: str) -> AsyncIterator[str]:
    """A database of its own on the PostgreSQL server (dropped after)."""
    name = f"toolwise_fresh_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(pg_url, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def test_instances_started_together_on_a_fresh_postgresql_database_all_come_up(
    fresh_pg_database: str, tmp_path: Path
) -> None:
    results = await asyncio.to_thread(start_together, fresh_pg_database, tmp_path)
    assert [(r.returncode, r.stdout.strip()) for r in results] == [(0, "up")] * INSTANCES, [
        r.stderr.strip().splitlines()[-8:] for r in results
    ]
    await assert_at_head(fresh_pg_database)


async def test_an_instance_waits_out_a_migration_longer_than_a_writes_busy_timeout(tmp_path: Path) -> None:
    """On a loaded machine a first start's migration can hold the schema lock for longer than the few
    seconds an ordinary write waits (CI saw "database is locked"); the others wait for it and come up."""
    path = tmp_path / "fresh.db"
    migrating = sqlite3.connect(path, isolation_level=None)
    migrating.execute("PRAGMA journal_mode=WAL")
    migrating.execute("BEGIN IMMEDIATE")  # another instance, migrating: it holds the lock for 1.5 s
    asyncio.get_running_loop().call_later(1.5, migrating.execute, "ROLLBACK")
    try:
        async with FeedbackService(f"sqlite+aiosqlite:///{path}", busy_timeout_s=0.2) as service:
            assert await service.reads.count_executions() == 0
    finally:
        migrating.close()
    await assert_at_head(f"sqlite+aiosqlite:///{path}")


async def test_an_instance_waits_out_another_switching_a_fresh_file_to_wal(tmp_path: Path) -> None:
    """The switch of a fresh file to WAL takes its exclusive lock, and SQLite answers "database is locked"
    there without waiting when waiting could deadlock (CI saw one of four instances die so). An instance
    that meets the lock held waits as long as for a migration, not the few seconds of a write."""
    path = tmp_path / "fresh.db"
    switching = sqlite3.connect(path, isolation_level=None)  # rollback journal: not yet in WAL
    switching.execute("BEGIN EXCLUSIVE")
    asyncio.get_running_loop().call_later(1.5, switching.execute, "ROLLBACK")
    try:
        async with FeedbackService(f"sqlite+aiosqlite:///{path}", busy_timeout_s=0.2) as service:
            assert await service.reads.count_executions() == 0
    finally:
        switching.close()
    await assert_at_head(f"sqlite+aiosqlite:///{path}")


async def test_two_stores_started_together_in_one_process_on_fresh_files_both_come_up(tmp_path: Path) -> None:
    """Two instances in one process (a test, a bench, an embedding app) each migrate their own fresh file;
    alembic's running migration is process-global, so two at once on one event loop collided ("table
    executions already exists")."""

    async def start(name: str) -> None:
        async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / name}"):
            pass

    await asyncio.gather(start("a.db"), start("b.db"), start("c.db"))
    for name in ("a.db", "b.db", "c.db"):
        await assert_at_head(f"sqlite+aiosqlite:///{tmp_path / name}")
