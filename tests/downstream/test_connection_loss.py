"""A call that finds its downstream's connection closed says the next call goes to the new connection:
so it does, even when it comes before the task that owns the connection has noticed (the dead connection
is never handed out again). The downstream is the reference mcp-server-time, in-process."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_server_time.server import create_server
from mcp_types.jsonrpc import INTERNAL_ERROR

from toolwise.config import InProcessServer, Settings, StdioServer
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


async def test_a_downstream_whose_streams_drop_as_soon_as_it_is_up_is_reconnected_to_ever_more_slowly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A 2026-07-28 downstream whose listen stream drops right after it is acknowledged (a proxy that cuts
    streams, a server whose stream fails) is up for an instant after each reconnect: the back-off between
    reconnects grows as it does for a downstream that will not start, not the first delay for ever (a
    reconnect every restart_backoff_s, the downstream hammered and its tools listed again each time)."""
    caplog.set_level(logging.INFO, logger="toolwise.downstream.connection")

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})])

    async def listen(ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams) -> Any:
        meta = {SUBSCRIPTION_ID_META_KEY: ctx.request_id}
        ack = types.SubscriptionsAcknowledgedNotificationParams(notifications=params.notifications, _meta=meta)
        await ctx.session.send_notification(
            types.SubscriptionsAcknowledgedNotification(params=ack), related_request_id=ctx.request_id
        )
        raise MCPError(INTERNAL_ERROR, "the stream dropped")

    server = Server("drops", on_list_tools=list_tools, on_subscriptions_listen=listen)
    settings = Settings(restart_backoff_s=0.01, restart_backoff_max_s=WAIT_S)
    downstream = Downstream("drops", InProcessServer(server), settings, on_tools=lambda: None)
    downstream.start()
    try:
        async with asyncio.timeout(WAIT_S):
            while downstream.restarts < 4:
                await asyncio.sleep(0.01)
    finally:
        await downstream.aclose()
    delays = [
        r.args[1] for r in caplog.records if r.msg == "restarting downstream %s in %.1fs" and isinstance(r.args, tuple)
    ]
    assert len(delays) >= 4
    assert delays[:4] == [0.01, 0.02, 0.04, 0.08], delays


@pytest.mark.skipif(os.name != "posix", reason="the process group of a POSIX spawn")
async def test_a_downstream_stopped_while_its_process_is_being_spawned_leaves_none_of_it_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (or a start given up) that lands while a stdio downstream's process is being spawned: the
    process exists but the spawn has not returned it yet. It and its children (a wrapper's: `npx`, `uvx`)
    are killed all the same, not left running after toolwise has gone."""
    pids = tmp_path / "pids"
    script = f"sleep 60 & echo $$ $! > {pids}; wait"  # the server and a child of its own, both recorded
    spawned = asyncio.Event()
    real_open_process = anyio.open_process

    async def slow_spawn(*args: Any, **kwargs: Any) -> Any:
        process = await real_open_process(*args, **kwargs)
        spawned.set()
        await asyncio.sleep(0.5)  # the spawn not yet returned (asyncio waits for its pipes to connect)
        return process

    monkeypatch.setattr(anyio, "open_process", slow_spawn)
    spec = StdioServer.model_validate({"command": "sh", "args": ["-c", script]})
    downstream = Downstream("spawning", spec, Settings(), on_tools=lambda: None)
    downstream.start()
    await asyncio.wait_for(spawned.wait(), WAIT_S)
    await downstream.aclose()
    deadline = asyncio.get_running_loop().time() + WAIT_S
    while not pids.exists() or pids.read_text().count(" ") < 1:
        assert asyncio.get_running_loop().time() < deadline, "the server never wrote its pids"
        await asyncio.sleep(0.05)
    running = [int(pid) for pid in pids.read_text().split()]
    while running and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.05)
        running = [pid for pid in running if alive(pid)]
    for pid in running:
        os.kill(pid, signal.SIGKILL)
    assert not running, "the downstream's process (or its child) still runs after the downstream stopped"


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, dead but not yet reaped by its parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
