"""Rows follow the schema's own columns: every column is filled from the execution field of its name,
so a column added or moved in schema.py cannot shift values into its neighbours."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import fields
from datetime import timedelta
from pathlib import Path

from tests.feedback.conftest import make_execution
from toolwise.feedback import Execution, FeedbackService
from toolwise.feedback.rows import EXECUTION_COLUMNS
from toolwise.feedback.schema import ExecutionRow


def test_every_stored_column_is_an_execution_field_and_back() -> None:
    columns = {c.key for c in ExecutionRow.__table__.columns}
    assert columns == {f.name for f in fields(Execution)}
    assert set(EXECUTION_COLUMNS) == columns - {"seq"}, "the database numbers the log itself"


async def test_each_column_holds_the_value_of_its_own_field(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    sent = make_execution(
        "git__git_status",
        arguments={"repo_path": "/tmp/r"},
        namespace="ns-value",
        session_id="session-value",
        context_hash="c" * 64,
        query="query value",
        previous_tool="git__git_log",
        position=3,
        decision_id="decision-value",
        propensity=0.25,
        success=False,
        error_type="ErrorTypeValue",
        error_message="error message value",
        latency_ms=12.5,
        result_size=42,
        reward=-5.2,
        instance="instance-value",
        explored=True,
    )
    sent.started_at -= timedelta(seconds=1)  # distinct from every other time
    async with FeedbackService(f"sqlite+aiosqlite:///{db}", store_arguments=True) as svc:
        await svc.log.record_execution(sent)
        got = await svc.reads.get_execution(sent.id)
        digest = svc.rows.digest(sent.arguments)
    with sqlite3.connect(db) as conn:
        cursor = conn.execute("SELECT * FROM executions")
        stored = dict(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))
    stored["arguments"] = json.loads(stored["arguments"])
    expected = {name: getattr(sent, name) for name in EXECUTION_COLUMNS}
    expected |= {"argument_digest": digest, "success": 0, "explored": 1}
    for name in ("started_at", "finished_at"):
        expected[name] = str(expected[name])  # SQLite keeps times as text
    assert {k: v for k, v in stored.items() if k != "seq"} == expected
    assert got is not None
    assert {name: getattr(got, name) for name in EXECUTION_COLUMNS} == {
        name: getattr(sent, name) for name in EXECUTION_COLUMNS
    } | {"argument_digest": digest}
