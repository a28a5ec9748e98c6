"""Two clients of one `toolwise serve --http`, each with its own bearer token, in both protocol eras:
client B can neither rate A's call (by its execution id, or by tool name while A is connected and
after A disconnected), nor end or read A's session by naming A's session id, nor see the argument
values A's calls used; A still can. The handshake era tells clients apart by their connection, the
2026-07-28 era (no connection at all) by their token."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import time_server, toolwise_http
from tests.server.surface import as_meta, execution_of, ok, text
from toolwise import sdk

TOKENS = {"a": "token-of-client-a-0123456789", "b": "token-of-client-b-0123456789"}
NOW = "time__get_current_time"


def client(url: str, who: str, mode: str) -> Client:
    headers = {"Authorization": f"Bearer {TOKENS[who]}"}
    return Client(streamable_http_client(url, http_client=sdk.http_client(headers=headers)), mode=mode)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_one_client_never_rates_ends_or_reads_anothers_calls_over_http(
    write_config: Callable[..., Path], tmp_path: Path, mode: str
) -> None:
    tokens = tmp_path / "tokens"
    tokens.write_text("# one token per client\n" + "\n".join(TOKENS.values()) + "\n")
    config = write_config({"time": time_server()}, http_token_file=str(tokens), store_arguments=True)
    async with toolwise_http(config) as url, client(url, "b", mode) as b:
        async with client(url, "a", mode) as a:
            ok(await a.call_tool("recommend_tool", {"query": "time in Tokyo", "session_id": "s1"}))
            called = await a.call_tool(NOW, {"timezone": "Asia/Tokyo"}, meta=as_meta({"toolwise/session_id": "s1"}))
            execution_id = execution_of(called)
            by_id = await b.call_tool("submit_feedback", {"rating": 1, "execution_id": execution_id})
            by_name = await b.call_tool("submit_feedback", {"rating": 1, "tool": NOW})
            chain = ok(await b.call_tool("recommend_next_tools", {"session_id": "s1"}))
            ended = await b.call_tool("end_session", {"outcome": "failure", "session_id": "s1"})
            asked = ok(await b.call_tool("recommend_tool", {"query": "time in Tokyo", "candidates": [NOW]}))
            mine = ok(await a.call_tool("recommend_tool", {"query": "time in Tokyo", "candidates": [NOW]}))
            assert ok(await a.call_tool("submit_feedback", {"rating": 5, "execution_id": execution_id}))
            assert ok(await a.call_tool("end_session", {"outcome": "success", "session_id": "s1"}))["tools"] == [NOW]
        after = await b.call_tool("submit_feedback", {"rating": 1, "tool": NOW})
    assert by_id.is_error and f"no call with execution_id {execution_id!r} made by this client" in text(by_id)
    for refused in (by_name, after):
        assert refused.is_error and "no call of 'time__get_current_time' in this session" in text(refused)
    assert chain["recent_tools"] == []
    assert ended.is_error and "has no calls to end" in text(ended)
    assert asked["recommendations"][0]["arguments"] == {}
    assert mine["recommendations"][0]["arguments"] == {"timezone": "Asia/Tokyo"}
