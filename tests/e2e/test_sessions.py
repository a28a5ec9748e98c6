"""Each client connection is its own session: one client never sees another's calls, nor rates one by
tool name; a call whose connection has gone is rated by tool name by the same client (over 2026-07-28
HTTP the same token, or none; in the handshake era a new connection is another client)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client

from tests.e2e.conftest import time_server, toolwise, toolwise_http
from tests.server.surface import execution_of, text
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

NOW = ("time__get_current_time", {"timezone": "UTC"})


async def test_two_open_http_connections_cannot_rate_or_see_each_others_calls(
    write_config: Callable[..., Path],
) -> None:
    async with toolwise_http(write_config({"time": time_server()})) as url:  # noqa: SIM117 - the server outlives both
        async with Client(url, mode="legacy") as a, Client(url, mode="legacy") as b:
            called = await a.call_tool(*NOW)
            assert not called.is_error
            rated = await b.call_tool("submit_feedback", {"rating": 1, "tool": NOW[0]})
            assert rated.is_error and "no call of 'time__get_current_time' in this session or" in text(rated)
            seen = await b.call_tool("recommend_next_tools", {})
            assert seen.structured_content["recent_tools"] == []
            # A's call can still be rated by its execution id (the handle the call returned), by A by tool.
            execution_id = execution_of(called)
            assert not (await a.call_tool("submit_feedback", {"rating": 5, "execution_id": execution_id})).is_error
            by_tool = await a.call_tool("submit_feedback", {"rating": 4, "tool": NOW[0]})
            assert not by_tool.is_error


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_readmes_http_snippet_rates_by_tool_name_on_a_new_connection(
    write_config: Callable[..., Path], mode: str
) -> None:
    """The README's HTTP client opens a connection per `async with`; on 2026-07-28 (the SDK's default)
    HTTP has no connection and the client is its token (here none: the loopback server's one client),
    so a call made in one `async with` is rated by its tool's name in the next. In the handshake era a
    new connection is another client, which never rates the first one's calls."""
    config = write_config({"time": time_server()})
    async with toolwise_http(config) as url:
        async with Client(url, mode=mode) as first:
            called = await first.call_tool(*NOW)
        async with Client(url, mode=mode) as second:
            rated = await second.call_tool("submit_feedback", {"rating": 5, "tool": NOW[0]})
            named = await second.call_tool("submit_feedback", {"rating": 5, "tool": NOW[0], "session_id": "s-1"})
    if mode == "legacy":
        assert rated.is_error and "no call of 'time__get_current_time' in this session or" in text(rated)
    else:
        assert not rated.is_error, text(rated)
        assert rated.structured_content["execution_id"] == execution_of(called)
    # A named session is searched alone; the error says what to pass instead.
    assert named.is_error and text(named) == (
        "submit_feedback: no call of 'time__get_current_time' in session 's-1' (its last 256 calls): "
        "pass execution_id (the call's _meta['toolwise/execution_id']), or leave session_id out to rate "
        "the newest call of the tool"
    )


async def test_one_shot_stdio_runs_rate_the_previous_runs_call_by_tool_name(write_config: Callable[..., Path]) -> None:
    """The Inspector CLI starts toolwise for each call: the rating's run finds the call of the run
    before it (stopped) in the log."""
    config = write_config({"time": time_server()})
    async with toolwise(config) as first:
        called = await first.call_tool(*NOW)
    async with toolwise(config) as second:
        rated = await second.call_tool("submit_feedback", {"rating": 2, "tool": NOW[0]})
        nothing = await second.call_tool("submit_feedback", {"rating": 2, "tool": "time__convert_time"})
    assert not rated.is_error, text(rated)
    assert rated.structured_content["execution_id"] == execution_of(called)
    assert nothing.is_error and text(nothing) == (
        "submit_feedback: no call of 'time__convert_time' in this session or in the last 10 minutes: "
        "pass execution_id (the call's _meta['toolwise/execution_id'])"
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_two_in_process_connections_are_two_sessions(tmp_path: Path, mode: str) -> None:
    config = AppConfig.model_validate(
        {
            "mcpServers": {"time": time_server()},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", "sync_interval_s": 0},
        }
    )
    async with Toolwise(config) as app:
        server = build_server(app)
        async with Client(server, mode=mode) as a, Client(server, mode=mode) as b:
            assert not (await a.call_tool(*NOW)).is_error
            if mode == "legacy":  # each connection a session, both open (2026-07-28 in process: no connection)
                assert (await b.call_tool("submit_feedback", {"rating": 1, "tool": NOW[0]})).is_error
            assert (await b.call_tool("recommend_next_tools", {})).structured_content["recent_tools"] == []
            if mode == "legacy":  # 2026-07-28 in process is per-request (the SDK gives no connection)
                seen = await a.call_tool("recommend_next_tools", {})
                assert seen.structured_content["recent_tools"] == [NOW[0]]
            assert not (await a.call_tool("submit_feedback", {"rating": 5, "tool": NOW[0]})).is_error
