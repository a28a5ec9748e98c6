"""A damaged database file shows in what a client and an admin read of the store's health."""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp import Client

from tests.feedback.test_integrity import damage_a_page, write_log
from tests.server.surface import time_server
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server


async def test_a_damaged_page_shows_in_the_learning_stats_and_the_heartbeat(tmp_path: Path) -> None:
    db = tmp_path / "toolwise.db"
    await write_log(db)
    page = damage_a_page(db)
    config = AppConfig.model_validate({"mcpServers": {}, "toolwise": {"database_url": f"sqlite+aiosqlite:///{db}"}})
    async with (
        Toolwise(config, in_process={"time": time_server()}) as app,
        Client(build_server(app), mode="legacy") as client,
    ):
        check = app.feedback.integrity
        assert check is not None
        await asyncio.to_thread(check.run)  # what runs on its own thread a few seconds after start
        stats = await client.call_tool("get_learning_stats", {})
        store = stats.structured_content["store"]
        assert store.startswith(f"damaged: {db} is damaged: ") and f"page {page}" in store
        assert (await app.upkeep.status())[
            "store"
        ] == store  # the heartbeat: `inspect status` and the dashboard read it
