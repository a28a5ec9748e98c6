"""A server's `includeTools` / `excludeTools`: what toolwise lists, what it lets a client call, and a
warning for a name that matches none of the server's tools."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from mcp.shared.exceptions import MCPError

from tests.server import toy_server
from tests.server.surface import running
from toolwise.config import InProcessServer, StdioServer, load_config


async def test_include_and_exclude_shape_the_listed_and_callable_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    toy = InProcessServer(
        toy_server.build(log=tmp_path / "toy.log"), include_tools=["echo", "s*", "nope_*"], exclude_tools=("sleep",)
    )
    with caplog.at_level(logging.WARNING, logger="toolwise.downstream.selection"):
        async with running(tmp_path, in_process={"toy": toy}) as (_, client):
            listed = {t.name for t in (await client.list_tools()).tools if t.name.startswith("toy__")}
            assert listed == {"toy__echo"}  # sleep is included by s* and excluded by name: exclude wins
            answer = await client.call_tool("toy__echo", {"text": "hi"})
            assert not answer.is_error
            with pytest.raises(MCPError, match="toy__fail"):
                await client.call_tool("toy__fail", {"reason": "left out"})
    assert "includeTools names no tool it lists: nope_*" in caplog.text


async def test_without_lists_every_tool_is_offered(tmp_path: Path) -> None:
    async with running(tmp_path) as (_, client):
        listed = {t.name for t in (await client.list_tools()).tools}
    assert {"toy__echo", "toy__fail", "toy__sleep"} <= listed


def test_the_file_takes_gemini_cli_keys_and_suggests_them_when_misspelt(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"mcpServers": {"git": {"command": "x", "excludeTools": ["git_reset"]}}}))
    spec = load_config(path).servers["git"]
    assert isinstance(spec, StdioServer) and spec.exclude_tools == ["git_reset"] and spec.include_tools is None
    path.write_text(json.dumps({"mcpServers": {"git": {"command": "x", "excludeTool": ["git_reset"]}}}))
    with pytest.raises(Exception, match="did you mean 'excludeTools'"):
        load_config(path)
