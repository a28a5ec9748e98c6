"""The export's JSON Lines: every execution once, in log order, with its fields as recorded, however
the log splits into chunks (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.feedback.conftest import make_execution
from toolwise.feedback import Execution, FeedbackService, utcnow
from toolwise.feedback.export import execution_chunks, rating_chunks
from toolwise.feedback.export_workers import ExportWorkerError


async def exported(
    service: FeedbackService, namespace: str, since: datetime | None = None, until: datetime | None = None
) -> list[dict[str, object]]:
    await service.flush()
    lines: list[dict[str, object]] = []
    async for rows, text in execution_chunks(service.engine, namespace=namespace, batch=7, since=since, until=until):
        assert text.endswith(b"\n") and text.count(b"\n") == rows  # one line a row, newlines inside escaped
        lines += [json.loads(line) for line in text.decode().splitlines()]
    return lines


async def check_export(service: FeedbackService, namespace: str) -> None:
    now = utcnow()
    for i in range(30):
        execution = make_execution(
            f"s__t{i % 3}",
            success=i % 4 != 0,
            namespace=namespace,
            query=f"ligne {i}\nzweite Zeile — ünïcode",
            arguments={"text": f"call {i}", "nested": {"n": i}},
            explored=None if i % 2 else bool(i % 3),
        )
        execution.finished_at = now - timedelta(hours=30 - i)
        await service.log.record_execution(execution)
    await service.log.record_execution(make_execution(namespace=f"{namespace}-other"))
    lines = await exported(service, namespace)
    records = [e for batch in [b async for b in service.reports.iter_executions(namespace=namespace)] for e in batch]
    assert [line["seq"] for line in lines] == [e.seq for e in records]  # all of them, in log order, once
    first = lines[5]
    assert first["query"] == "ligne 5\nzweite Zeile — ünïcode" and first["arguments"] == records[5].arguments
    assert first["success"] is True and lines[4]["success"] is False and first["explored"] is None
    assert lines[4]["explored"] is True and lines[6]["explored"] is False
    assert datetime.fromisoformat(str(first["finished_at"])) == records[5].finished_at
    async for _, text in execution_chunks(service.engine, namespace=namespace, kind="execution"):
        assert all(json.loads(line) == {"type": "execution", **lines[i]} for i, line in enumerate(text.splitlines()))
    since, until = now - timedelta(hours=20, minutes=30), now - timedelta(hours=5, minutes=30)
    window = await exported(service, namespace, since=since, until=until)
    assert [line["seq"] for line in window] == [e.seq for e in records if since <= e.finished_at < until]
    await check_ratings(service, namespace, [e.id for e in records])


async def check_ratings(service: FeedbackService, namespace: str, ids: list[str]) -> None:
    """Every rating of the namespace once, oldest first, with the rating it replaced; a window by
    the time it was made."""
    other = await service.log.record_execution(make_execution(namespace=f"{namespace}-other2"))
    await service.flush()
    await service.log.add_rating(ids[0], 2, "meh")
    await service.log.add_rating(other, 5)  # another namespace's, between this one's
    middle = utcnow()
    await service.log.add_rating(ids[0], 4)  # replaces the 2
    await service.log.add_rating(ids[3], 1, "wrong tool — ✗")

    async def rated(**scope: datetime) -> list[dict[str, object]]:
        lines: list[dict[str, object]] = []
        async for rows, text in rating_chunks(service.engine, namespace=namespace, batch=2, kind="rating", **scope):
            assert text.endswith(b"\n") and text.count(b"\n") == rows
            lines += [json.loads(line) for line in text.splitlines()]
        return lines

    lines = await rated()
    assert [(x["execution_id"], x["rating"], x["previous"], x["comment"]) for x in lines] == [
        (ids[0], 2, None, "meh"),
        (ids[0], 4, 2, None),
        (ids[3], 1, None, "wrong tool — ✗"),
    ]
    assert lines[0]["type"] == "rating" and int(str(lines[0]["id"])) < int(str(lines[1]["id"]))
    assert datetime.fromisoformat(str(lines[1]["created_at"])) >= middle
    assert [x["rating"] for x in await rated(since=middle)] == [4, 1]
    assert [x["rating"] for x in await rated(until=middle)] == [2]


async def test_export_chunks_hold_every_execution_in_order_on_sqlite(service: FeedbackService) -> None:
    await check_export(service, "default")


async def test_export_chunks_hold_every_execution_in_order_on_postgresql(pg_url: str) -> None:
    async with FeedbackService(pg_url) as service:
        await check_export(service, f"test-{uuid.uuid4().hex[:8]}")


async def test_an_export_stopped_early_leaves_no_chunk_being_read(service: FeedbackService) -> None:
    for i in range(40):
        await service.log.record_execution(make_execution(f"s__t{i % 3}"))
    await service.flush()
    chunks = execution_chunks(service.engine, batch=5, readers=3)
    async for rows, _ in chunks:
        assert rows == 5
        break
    await chunks.aclose()  # the two chunks read ahead are cancelled, not left running
    assert [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "").endswith("encode")] == []
    assert workers_of(service) == []
    with pytest.raises(ValueError, match="readers must be ≥ 1, got 0"):
        await anext(execution_chunks(service.engine, readers=0))


async def test_an_export_whose_worker_fails_says_why_and_leaves_no_worker(service: FeedbackService) -> None:
    """An SQLite file is encoded in worker processes: one that cannot read the database fails the
    export loudly, with SQLite's reason, and every worker is ended."""
    for i in range(10):
        await service.log.record_execution(make_execution(f"s__t{i % 3}"))
    await service.flush()
    async with service.engine.begin() as conn:
        await conn.exec_driver_sql("ALTER TABLE executions RENAME COLUMN tool TO tool_renamed")
    with pytest.raises(ExportWorkerError, match="no such column"):
        async for _ in execution_chunks(service.engine, batch=3):
            pass
    assert workers_of(service) == []


def workers_of(service: FeedbackService) -> list[str]:
    """Processes still running an export worker on this service's database file."""
    database = str(service.engine.url.database)
    running = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # ended while we looked
            continue
        if any(a.endswith(b"chunk_worker.py") for a in args) and database.encode() in args:
            running.append(cmdline.parent.name)
    return running


async def check_non_finite_arguments(url: str, namespace: str) -> None:
    """A client may send NaN or Infinity in a call's arguments (Python's JSON reads them): stored (with
    `store_arguments`) as the strings JSON has for them, so that the call is logged on PostgreSQL (whose
    json refuses the bare words) and an SQLite file's export still reads (its json() refused the row)."""
    async with FeedbackService(url, store_arguments=True) as service:
        odd = {"x": float("nan"), "y": [float("inf"), -float("inf")], "z": 0.5}
        kept = await service.log.record_execution(make_execution("t__odd", namespace=namespace, arguments=odd))
        await service.log.record_execution(make_execution("t__even", namespace=namespace, arguments={"z": 1}))
        stored = await service.reads.get_execution(kept)
        assert stored is not None and stored.arguments == {"x": "NaN", "y": ["Infinity", "-Infinity"], "z": 0.5}
        lines = await exported(service, namespace)
        assert [line["arguments"] for line in lines] == [stored.arguments, {"z": 1}]


async def test_non_finite_numbers_in_arguments_are_stored_and_exported_on_sqlite(tmp_path: Path) -> None:
    await check_non_finite_arguments(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", "default")


async def test_non_finite_numbers_in_arguments_are_stored_and_exported_on_postgresql(pg_url: str) -> None:
    await check_non_finite_arguments(pg_url, f"test-{uuid.uuid4().hex[:8]}")


async def test_arguments_stored_with_bare_nan_before_they_became_strings_do_not_stop_an_sqlite_export(
    tmp_path: Path,
) -> None:
    """A database written before NaN and ±infinity were stored as strings holds the bare words, which
    SQLite's JSON functions refuse ("malformed JSON"): that failed the whole namespace's export. Such a
    row's arguments are exported as their stored text, in a string; every other row as it is."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    async with FeedbackService(url, store_arguments=True) as service:
        old = await service.log.record_execution(make_execution("t__old", arguments={"x": 1}))
        await service.log.record_execution(make_execution("t__new", arguments={"z": 1}))
        await service.flush()
        async with service.engine.begin() as conn:
            await conn.exec_driver_sql(
                "UPDATE executions SET arguments = ? WHERE id = ?", ('{"x": NaN, "y": [Infinity, -Infinity]}', old)
            )
        lines = await exported(service, "default")
    assert [line["arguments"] for line in lines] == ['{"x": NaN, "y": [Infinity, -Infinity]}', {"z": 1}]


def finishing_at(tool: str, finished: datetime) -> Execution:
    execution = make_execution(tool)
    execution.started_at, execution.finished_at = finished - timedelta(seconds=1), finished
    return execution


async def test_an_export_bound_equal_to_a_whole_second_finish_time_includes_or_excludes_it_as_asked(
    tmp_path: Path,
) -> None:
    """[since, until) holds a call finished at `since` and not one finished at `until`, also when that time
    has no fraction of a second (its stored text has none either)."""
    whole = datetime(2026, 11, 1, 12, 0, 0, tzinfo=UTC)
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as service:
        for i in range(3):
            await service.log.record_execution(finishing_at(f"t__{i}", whole + timedelta(seconds=i)))
        since = await exported(service, "default", since=whole + timedelta(seconds=1))
        until = await exported(service, "default", until=whole + timedelta(seconds=1))
    assert [line["tool"] for line in since] == ["t__1", "t__2"]
    assert [line["tool"] for line in until] == ["t__0"]


async def test_an_imported_dead_letter_is_bounded_by_its_finish_time_as_a_logged_call_is(tmp_path: Path) -> None:
    """A call put back by `import-dead-letters` falls in [since, until) by its finish time, as the calls the
    writer logged do: `since` equal to it includes it, `until` equal to it excludes it."""
    finished = datetime(2026, 11, 1, 12, 0, 0, 250000, tzinfo=UTC)
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as service:
        await service.log.record_execution(finishing_at("t__logged", finished - timedelta(seconds=1)))
        service._dead_letter(finishing_at("t__imported", finished), OSError(28, "No space"))
        await service.log.record_execution(finishing_at("t__later", finished + timedelta(seconds=1)))
        assert await service.import_dead_letters(service.dead_letter_path) == (1, 0)
        since = await exported(service, "default", since=finished)
        until = await exported(service, "default", until=finished)
    assert sorted(str(line["tool"]) for line in since) == ["t__imported", "t__later"]
    assert [line["tool"] for line in until] == ["t__logged"]


async def test_line_separators_in_a_text_do_not_split_its_line_from_iter_execution_lines(
    service: FeedbackService,
) -> None:
    """JSON keeps U+2028, U+2029 and U+0085 raw inside a string, and JSON Lines ends a line at "\n" alone;
    `str.splitlines` also ends one at each of those: a query pasted with one split its execution in two."""
    query = "para\u2028graph\u2029 next\x85line"
    await service.log.record_execution(make_execution(query=query))
    await service.log.record_execution(make_execution(query="plain"))
    batches = [batch async for batch in service.reports.iter_execution_lines()]
    assert [json.loads(line)["query"] for batch in batches for line in batch] == [query, "plain"]


@pytest.mark.parametrize("driver", ["asyncpg", "psycopg"])
async def test_an_export_from_postgresql_gives_times_in_utc_whatever_the_servers_time_zone(
    pg_url: str, driver: str
) -> None:
    """PostgreSQL writes a timestamptz in its session's time zone, which is the server's (Debian's initdb
    takes the host's): the export's times must be UTC, as documented and as an SQLite file's are, through each
    driver SQLAlchemy takes as async."""
    pytest.importorskip(driver)
    name = f"toolwise_tz_{uuid.uuid4().hex[:8]}"
    admin = create_async_engine(pg_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
            await conn.exec_driver_sql(f"ALTER DATABASE \"{name}\" SET timezone TO 'Asia/Kolkata'")
        url = make_url(pg_url).set(drivername=f"postgresql+{driver}", database=name)
        async with FeedbackService(url.render_as_string(hide_password=False)) as service:
            finished = datetime(2026, 11, 1, 12, 0, 0, 250000, tzinfo=UTC)
            execution = make_execution()
            execution.started_at, execution.finished_at = finished - timedelta(seconds=1), finished
            await service.log.record_execution(execution)
            [line] = await exported(service, "default")
        assert line["finished_at"] == "2026-11-01T12:00:00.25+00:00"
    finally:
        async with admin.connect() as conn:
            await conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.dispose()
