"""Two clients of one toolwise never reach each other's conversations: client B can neither rate
(by execution id or by tool name), nor end, nor read (session chains, argument values) anything of
client A's, and a session id B names is B's own even when A named the same string; A still can.
In process: two `mcp.Client` connections to one server, the handshake era (a 2026-07-28 request in
process comes on no connection and carries no credential: nothing tells two such clients apart, so
tests/e2e/test_isolation.py holds that era to its bearer tokens over real HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client

from tests.server.surface import execution_of, ok, running, text
from toolwise.server.build import build_server

ECHO = "toy__echo"
SECRET = "alice salary 123456"


@asynccontextmanager
async def two_clients(tmp_path: Path, **settings: Any) -> AsyncIterator[tuple[Client, Client]]:
    """Client A and client B, each on its own connection to one toolwise."""
    async with running(tmp_path, **settings) as (app, a), Client(build_server(app), mode="legacy") as b:
        yield a, b


async def test_another_client_cannot_rate_a_call_by_its_execution_id(tmp_path: Path) -> None:
    async with two_clients(tmp_path) as (a, b):
        execution_id = execution_of(await a.call_tool(ECHO, {"text": "mine"}))
        refused = await b.call_tool("submit_feedback", {"rating": 1, "execution_id": execution_id})
        unknown = await b.call_tool("submit_feedback", {"rating": 1, "execution_id": "no-such-call"})
        rated = ok(await a.call_tool("submit_feedback", {"rating": 5, "execution_id": execution_id}))
    assert refused.is_error and text(refused) == (
        f"submit_feedback: no call with execution_id {execution_id!r} made by this client to rate: a client "
        "rates only its own calls (the _meta['toolwise/execution_id'] its call returned)"
    )
    assert unknown.is_error and "made by this client" in text(unknown)  # foreign and unknown alike
    assert rated["execution_id"] == execution_id


async def test_another_client_cannot_rate_a_call_by_tool_name_while_or_after_its_client_is_connected(
    tmp_path: Path,
) -> None:
    async with running(tmp_path) as (app, b):
        server = build_server(app)
        async with Client(server, mode="legacy") as a:
            called = execution_of(await a.call_tool(ECHO, {"text": "mine"}))
            while_connected = await b.call_tool("submit_feedback", {"rating": 1, "tool": ECHO})
            assert ok(await a.call_tool("submit_feedback", {"rating": 4, "tool": ECHO}))["execution_id"] == called
        after = await b.call_tool("submit_feedback", {"rating": 1, "tool": ECHO})
    for refused in (while_connected, after):
        assert refused.is_error and "no call of 'toy__echo' in this session or in the last 10 minutes" in text(refused)


async def test_a_session_id_another_client_named_is_a_session_of_its_own(tmp_path: Path) -> None:
    async with two_clients(tmp_path) as (a, b):
        ok(await a.call_tool("recommend_tool", {"query": "repeat a text", "session_id": "s1"}))
        ok(await a.call_tool(ECHO, {"text": "mine"}))
        chain = ok(await b.call_tool("recommend_next_tools", {"session_id": "s1"}))
        rated = await b.call_tool("submit_feedback", {"rating": 1, "tool": ECHO, "session_id": "s1"})
        ended = await b.call_tool("end_session", {"outcome": "failure", "session_id": "s1"})
        own = ok(await a.call_tool("end_session", {"outcome": "success", "session_id": "s1"}))
    assert chain["recent_tools"] == [] and chain["session_id"] == "s1"
    assert rated.is_error and "no call of 'toy__echo' in session 's1'" in text(rated)
    assert ended.is_error and "has no calls to end (a client ends only its own sessions)" in text(ended)
    assert (own["session_id"], own["tools"], own["outcome"]) == ("s1", [ECHO], "success")


async def suggested(client: Client) -> dict[str, Any]:
    """The argument values recommend_tool suggests for the echo tool."""
    answer = ok(await client.call_tool("recommend_tool", {"query": f"repeat {SECRET}", "candidates": [ECHO]}))
    return dict(answer["recommendations"][0]["arguments"])


async def test_argument_values_are_suggested_only_to_the_client_that_used_them(tmp_path: Path) -> None:
    async with two_clients(tmp_path, store_arguments=True) as (a, b):
        ok(await a.call_tool("recommend_tool", {"query": f"repeat {SECRET}", "candidates": [ECHO]}))
        ok(await a.call_tool(ECHO, {"text": SECRET}))
        theirs, mine = await suggested(b), await suggested(a)
    assert theirs == {} and mine == {"text": SECRET}


async def test_share_arguments_suggests_one_clients_values_to_every_client(tmp_path: Path) -> None:
    async with two_clients(tmp_path, store_arguments=True, share_arguments=True) as (a, b):
        ok(await a.call_tool("recommend_tool", {"query": f"repeat {SECRET}", "candidates": [ECHO]}))
        ok(await a.call_tool(ECHO, {"text": SECRET}))
        assert await suggested(b) == {"text": SECRET}


async def test_one_clients_timeouts_leave_the_circuit_closed_for_the_others(tmp_path: Path) -> None:
    async with two_clients(tmp_path, call_timeout_s=1, circuit_failures=5) as (a, b):
        for _ in range(5):
            slow = await a.call_tool("toy__sleep", {"seconds": 30})
            assert slow.is_error and "did not answer within 1s" in text(slow)
        fast = await a.call_tool("toy__echo", {"text": "again"})
        served = await b.call_tool(ECHO, {"text": "mine"})
        stats = ok(await b.call_tool("get_learning_stats", {}))
    assert fast.is_error and text(fast).startswith("this client's calls to 'toy' timed out 5 times in a row")
    assert not served.is_error and text(served) == "mine"
    assert stats["open_circuits"] == []


async def test_search_tools_answers_the_session_id_its_client_named(tmp_path: Path) -> None:
    """As recommend_tool and end_session do: the scope toolwise adds (`http-…/s1`, `conn-…/s1`) is the log's,
    not a name the client gave or should see."""
    async with running(tmp_path, exposure="search") as (_, client):
        found = ok(await client.call_tool("search_tools", {"query": "repeat a text", "session_id": "s1"}))
        recommended = ok(await client.call_tool("recommend_tool", {"query": "repeat a text", "session_id": "s1"}))
    assert (found["session_id"], recommended["session_id"]) == ("s1", "s1")
