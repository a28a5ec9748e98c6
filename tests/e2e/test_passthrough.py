"""toolwise in front of a server loses nothing: names under the configured prefix, and everything
else the downstream offers passes through."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import time_server, toolwise


async def test_an_empty_prefix_serves_the_downstreams_bare_tool_names(write_config: Callable[..., Path]) -> None:
    servers = {"time": {**time_server(), "prefix": ""}, "git": {"command": "mcp-server-git", "prefix": "vcs"}}
    async with toolwise(write_config(servers)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_current_time", "convert_time", "vcs__git_status", "recommend_tool"} <= names
        assert not any(n.startswith(("time__", "git__")) for n in names)
        called = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert not called.is_error and "toolwise/execution_id" in called.meta
