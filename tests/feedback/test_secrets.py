"""Nothing secret is stored readable: keys and values that look secret are masked, the argument digest
is salted per database, queries and comments can be left out, and the files are the owner's alone."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import pytest

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService, canonical_json
from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN, redact, redact_text

KEYS = re.compile(DEFAULT_REDACT_PATTERN, re.IGNORECASE)


@pytest.mark.parametrize(
    "key", ["pwd", "bearer", "private", "private_key", "otp", "jwt", "ssn", "card_number", "sessionid", "sessionId"]
)
def test_secret_key_names_are_masked(key: str) -> None:
    assert redact({key: "x1y2z3", "query": "fine"}, KEYS) == {key: "***", "query": "fine"}


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("postgres://admin:hunter2@db.example.com/app", "postgres://admin:***@db.example.com/app"),
        ("Authorization: Bearer abc.DEF-123_xyz~0", "Authorization: Bearer ***"),
        ("curl -u x -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "curl -u x -H 'Authorization: Basic ***'"),
        ("login with password=hunter2&user=bob", "login with password=***&user=bob"),
        ("api_key: sk-proj-abcdefghijklmnopqrstuvwx", "api_key: ***"),
        ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJl ok", "jwt *** ok"),
        ("AWS AKIAIOSFODNN7EXAMPLE here", "AWS *** here"),
        ("push with ghp_abcdefghijklmnopqrstuvwxyz0123456789", "push with ***"),
        ("slack xoxb-123456789012-abcdefghijkl", "slack ***"),
        ("anthropic sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic ***"),
        ("stripe sk_live_abcdefghijklmnop1234", "stripe ***"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIB\n-----END RSA PRIVATE KEY-----", "***"),
        ("pay with 4111 1111 1111 1111 today", "pay with *** today"),
    ],
)
def test_secrets_inside_values_are_masked_by_their_shape(text: str, redacted: str) -> None:
    assert redact_text(text) == redacted
    assert redact({"note": [text]}, KEYS) == {"note": [redacted]}


@pytest.mark.parametrize(
    "text",
    [
        "what changed in my repo since yesterday",
        "https://example.com/path?page=2",
        "order 1234567890123 shipped",  # a long number that fails the Luhn check
        "the key to a good commit message",
        "Europe/Paris 12:00",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


async def test_digest_is_salted_per_database(tmp_path: Path) -> None:
    args = {"pin": "1234"}
    digests = []
    for name in ("a.db", "b.db"):
        async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / name}", flush_interval_ms=1) as svc:
            execution_id = await svc.log.record_execution(make_execution(arguments=args))
            got = await svc.reads.get_execution(execution_id)
            assert got is not None and got.argument_digest == svc.rows.digest(args)
            digests.append(got.argument_digest)
    unsalted = hashlib.sha256(canonical_json(args).encode()).hexdigest()
    assert digests[0] != digests[1] and unsalted not in digests
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'a.db'}") as again:
        assert again.rows.digest(args) == digests[0], "the salt is kept in the database"


async def test_store_queries_off_stores_no_query_or_comment_and_values_are_redacted(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    url = f"sqlite+aiosqlite:///{db}"
    async with FeedbackService(url, store_queries=False, flush_interval_ms=1) as svc:
        quiet = await svc.log.record_execution(make_execution(query="my password is hunter2"))
        await svc.log.add_rating(quiet, 5, "nice, my otp was 123456")
    async with FeedbackService(url, flush_interval_ms=1) as svc:
        loud = await svc.log.record_execution(
            make_execution(query="clone https://bob:hunter2@git.example/r", error_message="token=abcdef123456 refused")
        )
        await svc.log.add_rating(loud, 4, "with Bearer abcdefgh12345678")
    with sqlite3.connect(db) as conn:
        executions = conn.execute("SELECT query, error_message FROM executions ORDER BY seq").fetchall()
        comments = conn.execute("SELECT comment FROM ratings ORDER BY id").fetchall()
    assert executions == [(None, None), ("clone https://bob:***@git.example/r", "token=*** refused")]
    assert comments == [(None,), ("with Bearer ***",)]


async def test_database_and_dead_letter_files_are_the_owners_alone(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    async with FeedbackService(f"sqlite+aiosqlite:///{db}", flush_interval_ms=1) as svc:
        await svc.log.record_execution(make_execution())
        await svc.flush()
        svc._dead_letter(make_execution(), RuntimeError("refused"))  # the writer's last resort, called directly
        files = [db, db.with_name("toolwise.db-wal"), db.with_name("toolwise.db-shm"), svc.dead_letter_path]
        modes = {f.name: f.stat().st_mode & 0o777 for f in files}
    assert modes == {f.name: 0o600 for f in files}
