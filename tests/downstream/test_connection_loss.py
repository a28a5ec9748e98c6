"""A call that finds its downstream's connection closed says the next call goes to the new connection:
so it does, even when it comes before the task that owns the connection has noticed (the dead connection
is never handed out again). The downstream is the reference mcp-server-time, in-process."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp_server_time.server import create_server

from toolwise.config import InProcessServer, Settings
from toolwise.downstream.connection import Downstream
from toolwise.downstream.forwarding import InputRound

WAIT_S = 5.0  # the longest a step waits for what it expects (a twin opens for up to start_timeout_s, 30 s)


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


async def test_a_downstream_stopped_while_its_twin_opens_leaves_no_connection_behind() -> None:
    """Stopped while its handshake-era twin is still opening (a downstream slow to answer it), a downstream
    stops the twin too: nothing of it goes on holding a connection once the downstream has stopped."""
    listed = asyncio.Event()
    lists = 0

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        nonlocal lists
        lists += 1
        if lists > 1:  # the twin's: it never answers
            listed.set()
            await asyncio.Event().wait()
        return types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})])

    downstream = Downstream("slow", InProcessServer(Server("slow", on_list_tools=list_tools)), Settings(), lambda: None)
    downstream.start()
    await asyncio.wait_for(listed.wait(), WAIT_S)  # its first connection is up, the twin opening
    await downstream.aclose()
    twins = [t for t in asyncio.all_tasks() if t.get_name() == "toolwise-twin-slow"]
    _, going_on = await asyncio.wait(twins, timeout=WAIT_S) if twins else (set(), set())
    assert not going_on, "the twin still opens (and would hold its connection) after the downstream stopped"
