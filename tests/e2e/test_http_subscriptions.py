"""A client that ends its HTTP session (the SDK's client sends DELETE on close; an idle session times out
likewise) leaves no resource subscription behind: toolwise drops it from its books and undoes the one it
made at the downstream for it, as an unsubscribe would. toolwise's streamable HTTP app is served by
uvicorn in this process, its downstream the in-process memo server of tests/server/test_subscriptions.py."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path

import anyio
import uvicorn
from mcp import Client
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.e2e.conftest import free_port
from tests.server.memo_server import memo
from tests.server.surface import running
from toolwise.config import InProcessServer
from toolwise.server.build import build_server

WAIT_S = 10.0  # the longest a step of the test waits for what it expects


async def test_a_client_that_ends_its_http_session_leaves_no_subscription_behind(tmp_path: Path) -> None:
    subscribed: list[ServerSession] = []
    answer = asyncio.Event()
    answer.set()
    downstream = {"memo": InProcessServer(memo(subscribed, asyncio.Event(), answer))}
    async with running(tmp_path, {}, in_process=downstream) as (app, _):
        port = free_port()
        config = uvicorn.Config(build_server(app).streamable_http_app(), host="127.0.0.1", port=port, log_config=None)
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        try:
            with anyio.fail_after(WAIT_S):
                while not server.started:
                    await asyncio.sleep(0.01)
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                with warnings.catch_warnings():  # the handshake era's way
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.subscribe_resource("memo://x")
                assert len(subscribed) == 1
            with anyio.fail_after(WAIT_S):
                while subscribed:  # undone at the downstream once the session ended
                    await asyncio.sleep(0.01)
            assert app.passthrough.subscriptions.subscribers == {}
        finally:
            server.should_exit = True
            await serving
