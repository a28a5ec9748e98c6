"""Each client connection is its own session: one client never sees or rates another's calls."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client

from tests.e2e.conftest import time_server, toolwise_http
from toolwise.server.app import Toolwise, build_server
from toolwise.server.config import AppConfig

NOW = ("time__get_current_time", {"timezone": "UTC"})


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_two_http_clients_cannot_rate_or_see_each_others_calls(
    write_config: Callable[..., Path], mode: str
) -> None:
    async with toolwise_http(write_config({"time": time_server()})) as url:  # noqa: SIM117 - the server outlives both
        async with Client(url, mode=mode) as a, Client(url, mode=mode) as b:
            called = await a.call_tool(*NOW)
            assert not called.is_error
            rated = await b.call_tool("submit_feedback", {"rating": 1, "tool": NOW[0]})
            assert rated.is_error and "no call" in rated.content[0].text
            seen = await b.call_tool("recommend_next_tools", {})
            assert seen.structured_content["recent_tools"] == []
            # A's call can still be rated by its execution id (the handle the call returned).
            execution_id = called.meta["toolwise/execution_id"]
            assert not (await a.call_tool("submit_feedback", {"rating": 5, "execution_id": execution_id})).is_error
            if mode == "legacy":  # a handshake-era connection is a session: A finds its own call by tool
                by_tool = await a.call_tool("submit_feedback", {"rating": 4, "tool": NOW[0]})
                assert not by_tool.is_error


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
            assert (await b.call_tool("submit_feedback", {"rating": 1, "tool": NOW[0]})).is_error
            assert (await b.call_tool("recommend_next_tools", {})).structured_content["recent_tools"] == []
            if mode == "legacy":  # 2026-07-28 in process is per-request (the SDK gives no connection)
                seen = await a.call_tool("recommend_next_tools", {})
                assert seen.structured_content["recent_tools"] == [NOW[0]]
                assert not (await a.call_tool("submit_feedback", {"rating": 5, "tool": NOW[0]})).is_error
