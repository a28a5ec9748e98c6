from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.e2e.conftest import BIN

GROWING = str(Path(__file__).with_name("growing_server.py"))


@pytest.mark.parametrize("downstream_mode", ["auto", "legacy"])
async def test_a_downstream_tool_list_change_reaches_handshake_era_clients(
    write_config: Callable[..., Path], downstream_mode: str
) -> None:
    config = write_config({"grow": {"command": sys.executable, "args": [GROWING]}}, mode=downstream_mode)
    heard = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    params = StdioServerParameters(command=str(BIN / "toolwise"), args=["serve", "-c", str(config)])
    async with Client(params, mode="legacy", message_handler=on_message) as client:
        tools = client.server_capabilities.tools
        assert tools is not None and tools.list_changed is True
        assert "grow__extra" not in {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("grow__add_tool", {"name": "extra"})
        async with asyncio.timeout(10):
            await heard.wait()
        names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
    assert "grow__extra" in names


async def test_a_downstream_tool_list_change_reaches_2026_clients_through_listen(
    write_config: Callable[..., Path],
) -> None:
    config = write_config({"grow": {"command": sys.executable, "args": [GROWING]}})
    params = StdioServerParameters(command=str(BIN / "toolwise"), args=["serve", "-c", str(config)])
    async with Client(params, mode="auto") as client:
        assert client.protocol_version.startswith("2026")
        async with client.listen(tools_list_changed=True) as subscription:
            await client.call_tool("grow__add_tool", {"name": "later"})
            async with asyncio.timeout(10):
                await anext(aiter(subscription))
        names = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
    assert "grow__later" in names
