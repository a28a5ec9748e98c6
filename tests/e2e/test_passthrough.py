"""toolwise in front of a server loses nothing: names under the configured prefix, and everything
else the downstream offers passes through."""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import PromptsListChanged, ResourceUpdated

from tests.e2e.conftest import time_server, toolwise
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server


async def test_an_empty_prefix_serves_the_downstreams_bare_tool_names(write_config: Callable[..., Path]) -> None:
    servers = {"time": {**time_server(), "prefix": ""}, "git": {"command": "mcp-server-git", "prefix": "vcs"}}
    async with toolwise(write_config(servers)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"get_current_time", "convert_time", "vcs__git_status", "recommend_tool"} <= names
        assert not any(n.startswith(("time__", "git__")) for n in names)
        called = await client.call_tool("get_current_time", {"timezone": "UTC"})
        assert not called.is_error and "toolwise/execution_id" in (called.meta or {})


async def test_a_downstreams_requests_reach_only_the_client_whose_call_caused_them(tmp_path: Path) -> None:
    asking = {"command": sys.executable, "args": [str(Path(__file__).with_name("asking_server.py"))], "prefix": ""}
    settings = {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'tw.db'}", "sync_interval_s": 0, "mode": "legacy"}
    config = AppConfig.model_validate({"mcpServers": {"asking": asking}, "toolwise": settings})

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(text="hi from A"), model="m")

    def said(result: types.CallToolResult) -> str:
        return result.content[0].text  # type: ignore[union-attr]

    async with Toolwise(config) as app:
        server = build_server(app)
        async with (
            Client(server, mode="legacy", sampling_callback=sampling) as a,
            Client(server, mode="legacy") as b,
            Client(server) as modern,
        ):
            assert said(await a.call_tool("ask_now", {})) == "answered: hi from A"
            refused = said(await b.call_tool("ask_now", {}))
            assert refused.startswith("refused: toolwise cannot relay") and "did not declare sampling" in refused
            assert "cannot send requests" in said(await modern.call_tool("ask_now", {}))
            await a.call_tool("ask_later", {})
            await asyncio.sleep(0.8)  # it asks 0.3 s after the call, when no call is in flight
            between = said(await a.call_tool("what_happened", {}))
            assert between.startswith("refused:") and "no client call is in flight" in between


@pytest.mark.parametrize("downstream_mode", ["auto", "legacy"])
@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_resource_updates_and_prompt_list_changes_reach_the_client(
    tmp_path: Path, mode: str, downstream_mode: str
) -> None:
    changing = {"command": sys.executable, "args": [str(Path(__file__).with_name("changing_server.py"))]}
    settings = {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'tw.db'}", "sync_interval_s": 0}
    config = AppConfig.model_validate(
        {"mcpServers": {"changing": changing}, "toolwise": {**settings, "mode": downstream_mode}}
    )
    heard: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(f"updated {message.params.uri}")
        elif isinstance(message, types.PromptListChangedNotification):
            heard.append("prompts changed")

    async def changes(client: Client) -> None:
        await client.call_tool("changing__edit_note", {"value": "second"})
        await client.call_tool("changing__add_prompt", {"value": "bye"})

    want = ["prompts changed", "updated memo://note"]
    async with Toolwise(config) as app, Client(build_server(app), mode=mode, message_handler=on_message) as client:
        assert {"memo://note"} == {r.uri for r in (await client.list_resources()).resources}
        if client.protocol_version.startswith("2025"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource("memo://note")
            await changes(client)
            with anyio.fail_after(10):
                while sorted(set(heard)) != want:
                    await asyncio.sleep(0.05)
        else:
            async with client.listen(resource_subscriptions=["memo://note"], prompts_list_changed=True) as events:
                await changes(client)
                with anyio.fail_after(10):
                    async for event in events:
                        if isinstance(event, ResourceUpdated):
                            heard.append(f"updated {event.uri}")
                        else:
                            heard.append("prompts changed" if isinstance(event, PromptsListChanged) else repr(event))
                        if sorted(set(heard)) == want:
                            break
        assert (await client.read_resource("memo://note")).contents[0].text == "second"  # type: ignore[union-attr]
        assert "changing__bye" in {p.name for p in (await client.list_prompts()).prompts}
