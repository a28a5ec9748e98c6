"""A conversation's id is the client's to choose, of any length; the log keeps at most 128 characters of a
session id (feedback/schema.py: PostgreSQL refuses more, and the failed batch took every record in it to
the dead letters, `end_session` answering a database error). A long id is kept as a bounded one, the same
for the same id: its calls and its end still meet."""

from __future__ import annotations

from pathlib import Path

from tests.server.surface import ok, rows, serving
from toolwise.learning.sessions import session_meta

LONG = "conversation-" + "x" * 300


async def test_a_session_id_longer_than_the_log_keeps_still_names_one_conversation(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        ok(await client.call_tool("recommend_tool", {"query": "echo this", "session_id": LONG}))
        assert not (await client.call_tool("toy__echo", {"text": "hi"}, meta=session_meta(LONG))).is_error
        ended = ok(await client.call_tool("end_session", {"outcome": "success", "session_id": LONG}))
    assert ended["tools"] == ["toy__echo"]
    assert rows(tmp_path, "SELECT max(length(session_id)) FROM executions")[0][0] <= 128
    assert rows(tmp_path, "SELECT max(length(session_id)) FROM episodes")[0][0] <= 128


CUT = "conversation 😀\ud83d"  # a JavaScript client that cut its id mid-character: half a surrogate pair


async def test_a_session_id_cut_mid_character_still_names_one_conversation_and_is_logged(tmp_path: Path) -> None:
    """No database stores half a surrogate pair (it is not UTF-8): the call and the end of a conversation so
    named were refused, and their dead letters too. The id is kept with U+FFFD in its place."""
    async with serving(tmp_path) as client:
        ok(await client.call_tool("recommend_tool", {"query": "echo this", "session_id": CUT}))
        assert not (await client.call_tool("toy__echo", {"text": "hi"}, meta=session_meta(CUT))).is_error
        ended = ok(await client.call_tool("end_session", {"outcome": "success", "session_id": CUT}))
    assert ended["tools"] == ["toy__echo"]
    for table in ("executions", "episodes"):
        [(session,)] = rows(tmp_path, f"SELECT session_id FROM {table}")
        assert session.endswith("/conversation 😀\ufffd"), session  # after its connection's own id
