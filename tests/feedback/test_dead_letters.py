"""A full data disk loses no answered call: what the database cannot take goes to the dead-letter file
(into the space reserved for it), else to a file on another file system, named in an error, and can be
put back; what no file takes is logged whole as lost."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.feedback.conftest import full_disk, make_execution  # noqa: F401 - the fixture
from tests.feedback.test_export import exported
from toolwise.feedback import FeedbackService, deadletter
from toolwise.feedback.deadletter import RESERVE_BYTES, DeadLetters


def refuse_writes(monkeypatch: pytest.MonkeyPatch, full: Callable[[Path], bool]) -> None:
    """Appends to a dead-letter file fail as on a full disk while `full(path)` says so."""
    original = deadletter.append_line

    def append_line(path: Path, data: bytes) -> None:
        if full(path):
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        original(path, data)

    monkeypatch.setattr(deadletter, "append_line", append_line)


async def shut_down_with_records(db: Path, dead: Path, count: int) -> list[str]:
    """Record `count` calls a full database cannot take, then shut down: they are dead-lettered."""
    svc = FeedbackService(f"sqlite+aiosqlite:///{db}", dead_letter_path=dead, store_timeout_s=0.3)
    await svc.start()
    ids = [await svc.log.record_execution(make_execution()) for _ in range(count)]
    await asyncio.wait_for(svc.aclose(), 10)
    return ids


def ids_in(path: Path) -> list[str]:
    return [json.loads(line)["execution"]["id"] for line in path.read_text().splitlines()] if path.exists() else []


async def test_on_a_full_data_disk_dead_letters_go_to_another_file_system_and_are_imported_back(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    full_disk: list[bool],  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    data, runtime = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    db, dead = data / "toolwise.db", data / "toolwise-dead-letter.jsonl"
    refuse_writes(monkeypatch, lambda path: path.parent == data)  # the data disk takes nothing, reserve or not
    with caplog.at_level(logging.ERROR):
        ids = await shut_down_with_records(db, dead, 30)
    assert ids_in(dead) == []
    moved = DeadLetters(dead).fallbacks[0]
    assert moved.parent == runtime / "toolwise" and sorted(ids_in(moved)) == sorted(ids)
    assert f"toolwise import-dead-letters {moved}" in caplog.text  # the error says where they went
    assert moved.stat().st_mode & 0o777 == 0o600

    full_disk[0] = False  # room again: put them back
    async with FeedbackService(f"sqlite+aiosqlite:///{db}") as svc:
        assert await svc.import_dead_letters(moved) == (30, 0)
        assert await svc.import_dead_letters(moved) == (0, 30)  # twice is harmless
        assert await svc.reads.count_executions("default") == 30
        [metrics] = await svc.reports.get_tool_metrics()
        assert metrics.calls == 30


async def test_the_space_reserved_on_the_data_disk_takes_the_dead_letters(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    full_disk: list[bool],  # noqa: F811
) -> None:
    db, dead = tmp_path / "toolwise.db", tmp_path / "toolwise-dead-letter.jsonl"
    reserve = dead.with_name(dead.name + ".reserve")
    # the disk is full until the reserve is given back
    refuse_writes(monkeypatch, lambda path: reserve.stat().st_size > 0)
    ids = await shut_down_with_records(db, dead, 10)
    assert sorted(ids_in(dead)) == sorted(ids)
    assert reserve.stat().st_size == 0


async def test_the_reserve_is_made_at_start_beside_the_database(tmp_path: Path) -> None:
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as svc:
        reserve = svc.dead_letters.reserve_path
        assert reserve.parent == tmp_path and reserve.stat().st_size == RESERVE_BYTES
        assert reserve.stat().st_blocks * 512 >= RESERVE_BYTES  # taken on disk, not a sparse promise


async def test_a_record_no_file_takes_is_logged_whole_as_lost(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    full_disk: list[bool],  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    refuse_writes(monkeypatch, lambda path: True)
    with caplog.at_level(logging.ERROR):
        [lost] = await shut_down_with_records(tmp_path / "toolwise.db", tmp_path / "dead.jsonl", 1)
    [line] = [r.getMessage() for r in caplog.records if "feedback record lost" in r.getMessage()]
    assert f"execution {lost} is lost" in line and f'"id":"{lost}"' in line
    assert "No space left on device" in line and str(tmp_path / "dead.jsonl") in line


async def test_dead_letters_are_imported_into_postgresql(tmp_path: Path, pg_url: str) -> None:
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    async with FeedbackService(pg_url, dead_letter_path=tmp_path / "dead.jsonl") as svc:
        for _ in range(3):  # the writer's last resort, called directly
            svc._dead_letter(make_execution(namespace=namespace, arguments={"q": 1}), OSError(28, "No space"))
        assert await svc.import_dead_letters(svc.dead_letter_path) == (3, 0)
        assert await svc.reads.count_executions(namespace) == 3


async def check_an_older_dead_letters_non_finite_arguments(url: str, namespace: str, tmp_path: Path) -> None:
    """A dead letter written before NaN and ±infinity were stored as strings (494bde0) holds the bare words in
    its arguments: imported as a newer toolwise stores them, the strings, so that the row reads back as JSON
    (SQLite kept the bare words, which read back as floats and were exported as one string; PostgreSQL's json
    refused the import)."""
    async with FeedbackService(url, store_arguments=True, dead_letter_path=tmp_path / "dead.jsonl") as svc:
        row = svc.rows.named(make_execution(namespace=namespace, arguments={"z": 0.5}))
        row["arguments"] = {"x": float("nan"), "y": [float("inf"), -float("inf")], "z": 0.5}  # as it was written
        older = tmp_path / "older.jsonl"
        older.write_text(json.dumps({"error": "OSError(28)", "execution": row}, default=str) + "\n")
        assert "NaN" in older.read_text() and '"NaN"' not in older.read_text()
        assert await svc.import_dead_letters(older) == (1, 0)
        stored = await svc.reads.get_execution(row["id"])
        newer = {"x": "NaN", "y": ["Infinity", "-Infinity"], "z": 0.5}
        assert stored is not None and stored.arguments == newer
        assert [line["arguments"] for line in await exported(svc, namespace)] == [newer]


async def test_an_older_dead_letters_nan_arguments_are_imported_as_strings_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    await check_an_older_dead_letters_non_finite_arguments(url, "default", tmp_path)


async def test_an_older_dead_letters_nan_arguments_are_imported_as_strings_on_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    await check_an_older_dead_letters_non_finite_arguments(pg_url, f"test-{uuid.uuid4().hex[:8]}", tmp_path)
