"""A call that finds its downstream's connection closed says the next call goes to the new connection:
so it does, even when it comes before the task that owns the connection has noticed (the dead connection
is never handed out again). The downstream is the reference mcp-server-time, in-process."""

from __future__ import annotations

import asyncio

from mcp_server_time.server import create_server

from toolwise.config import InProcessServer, Settings
from toolwise.downstream.connection import Downstream
from toolwise.downstream.forwarding import InputRound


async def test_a_call_after_one_found_the_connection_closed_goes_to_the_new_connection() -> None:
    downstream = Downstream("time", InProcessServer(create_server("UTC")), Settings(), on_tools=lambda: None)
    downstream.start()
    try:
        await downstream.wait_first_attempt()
        dead = downstream.client
        assert dead is not None
        downstream.broke(dead)  # a call found it closed
        deadline = asyncio.get_running_loop().time() + 10
        modern = InputRound()  # a 2026-07-28 caller's: the connection itself, not its handshake-era twin
        assert await downstream.ready_session(deadline, "get_current_time", modern) is not dead
        assert downstream.restarts == 1
    finally:
        await downstream.aclose()
