"""recommend_tool suggests argument values that worked for similar requests, only where toolwise keeps
arguments (store_arguments), never from failed calls. In-process through the MCP surface with the
reference mcp-server-time downstream served in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import Client

from tests.server.surface import text, time_server
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

NOW = "time__get_current_time"


def config(db: Path, store_arguments: bool) -> AppConfig:
    settings = {"database_url": f"sqlite+aiosqlite:///{db}", "seed": 1, "snapshot_interval_s": 0}
    return AppConfig.model_validate({"mcpServers": {}, "toolwise": {**settings, "store_arguments": store_arguments}})


async def suggestions(db: Path, store_arguments: bool) -> dict[str, Any]:
    async with (
        Toolwise(config(db, store_arguments), in_process={"time": time_server()}) as app,
        Client(build_server(app), mode="legacy") as client,
    ):
        for city, zone in (("Tokyo", "Asia/Tokyo"), ("Osaka", "Asia/Tokyo"), ("Paris", "Europe/Paris")):
            await client.call_tool("recommend_tool", {"query": f"what time is it in {city}", "session_id": city})
            called = await client.call_tool(NOW, {"timezone": zone})
            assert not called.is_error
        await client.call_tool("recommend_tool", {"query": "what time is it in Lyon", "session_id": "lyon"})
        failed = await client.call_tool(NOW, {"timezone": "Mars/Olympus"})  # fails: never a suggestion
        assert failed.is_error
        asked = await client.call_tool("recommend_tool", {"query": "current time in Kyoto, Japan", "top_k": 2})
        found = {r["tool"]: r["arguments"] for r in asked.structured_content["recommendations"]}
        assert "worked before" in text(asked) or not store_arguments
        return found


async def test_a_similar_request_gets_the_value_that_worked(tmp_path: Path) -> None:
    found = await suggestions(tmp_path / "on.db", store_arguments=True)
    assert found[NOW] == {"timezone": "Asia/Tokyo"}


async def test_without_stored_arguments_nothing_is_suggested(tmp_path: Path) -> None:
    found = await suggestions(tmp_path / "off.db", store_arguments=False)
    assert all(arguments == {} for arguments in found.values())
