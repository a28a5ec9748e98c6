"""An HTTP downstream that restarts (or forgets its sessions) is reconnected to: on the handshake era its
new process answers toolwise's old session with 404 ("Session terminated"), which is a lost connection,
not the tool refusing a call. The call that meets it fails saying so; the calls after the reconnect work.
The downstream is the reference mcp-server-time over real streamable HTTP (uvicorn, in this process),
stopped and started again on the same port."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ResourceUpdated
from mcp_server_time.server import create_server
from starlette.applications import Starlette

from tests.e2e.conftest import free_port
from tests.server.memo_server import memo
from tests.server.surface import text
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

WAIT_S = 20.0  # the longest the test waits for the reconnect
NOW = "time__get_current_time"


class TimeOverHttp:
    """mcp-server-time (or what `serve` makes) at http://127.0.0.1:PORT/mcp while started; each start a
    fresh process's state."""

    def __init__(self, port: int, serve: Callable[[], Starlette] | None = None) -> None:
        self.port = port
        self._serve = serve or (lambda: create_server("UTC").streamable_http_app())
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        app = self._serve()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, timeout_graceful_shutdown=1)
        self._server = server = uvicorn.Server(config)
        self._task = asyncio.create_task(server.serve())
        with anyio.fail_after(WAIT_S):
            while not server.started:
                await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = self._task = None


async def test_an_http_downstream_restarted_is_reconnected_to(tmp_path: Path) -> None:
    """toolwise in `mode: legacy`: its one connection to the downstream is of the handshake era."""
    port = free_port()
    downstream = TimeOverHttp(port)
    await downstream.start()
    try:
        async with Toolwise(config(tmp_path, port, "legacy")) as app, Client(build_server(app)) as client:
            first = await client.call_tool(NOW, {"timezone": "UTC"})
            assert not first.is_error, text(first)
            await downstream.stop()
            await downstream.start()  # restarted: it knows no session of before
            met = await client.call_tool(NOW, {"timezone": "UTC"})  # fails, or goes to the new session already
            with anyio.fail_after(WAIT_S):
                while (health := app.catalogue.health()[0]).state != "ready" or health.restarts < 1:
                    await asyncio.sleep(0.05)
            after = await client.call_tool(NOW, {"timezone": "UTC"})
            assert not after.is_error, f"{text(after)} (the call before: {text(met)})"
    finally:
        await downstream.stop()


async def test_the_handshake_era_twin_of_an_http_downstream_restarted_is_reopened(tmp_path: Path) -> None:
    """toolwise in `mode: auto`: its 2026-07-28 connection has no session, its handshake-era twin (what a
    handshake-era caller is served on, `downstream/twin.py`) has one."""
    port = free_port()
    downstream = TimeOverHttp(port)
    await downstream.start()
    try:
        async with (
            Toolwise(config(tmp_path, port, "auto")) as app,
            Client(build_server(app), mode="legacy") as client,
        ):
            first = await client.call_tool(NOW, {"timezone": "UTC"})
            assert not first.is_error, text(first)
            twin = app.catalogue.downstreams["time"].twin
            assert twin is not None and twin.current is not None
            before = twin.current
            await downstream.stop()
            await downstream.start()  # restarted: it knows no session of before
            met = await client.call_tool(NOW, {"timezone": "UTC"})  # fails, or goes to the new session already
            with anyio.fail_after(WAIT_S):
                while twin.current is before:
                    await asyncio.sleep(0.05)
            after = await client.call_tool(NOW, {"timezone": "UTC"})
            assert not after.is_error, f"{text(after)} (the call before: {text(met)})"
    finally:
        await downstream.stop()


async def test_a_subscription_on_the_twin_of_an_http_downstream_restarted_is_made_again(tmp_path: Path) -> None:
    """A handshake-era caller's resource subscription is made on the twin; the downstream restarted, the
    twin is reopened at once and the subscription made again on it, with no call of the client's needed
    (the 2026-07-28 connection, sessionless, goes on)."""
    port = free_port()
    subscribed: list[list[ServerSession]] = []

    def serve() -> Starlette:
        answer = asyncio.Event()
        answer.set()
        subscribed.append([])  # this process's subscriptions
        return memo(subscribed[-1], asyncio.Event(), answer).streamable_http_app()

    downstream = TimeOverHttp(port, serve)
    await downstream.start()
    try:
        async with (
            Toolwise(config(tmp_path, port, "auto", "memo")) as app,
            Client(build_server(app), mode="legacy") as client,
        ):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await client.subscribe_resource("memo://x")
            assert len(subscribed[-1]) == 1
            twin = app.catalogue.downstreams["memo"].twin
            assert twin is not None
            before = twin.current
            await downstream.stop()
            await downstream.start()  # restarted: it knows no session, and no subscription, of before
            with anyio.fail_after(WAIT_S):
                while not subscribed[-1]:  # its standing stream, reconnecting, met the 404: made again at once
                    await asyncio.sleep(0.05)
            assert twin.current is not before
            assert text(await client.call_tool("memo__touch", {})) == "told 1"
    finally:
        await downstream.stop()


class NoGetStream:
    """ASGI middleware: a server that takes POST alone, its GET stream answered 404 as an Express app with only
    `app.post('/mcp')` answers it (the spec asks for 405); `gets` counts the GETs refused."""

    def __init__(self, app: Any, gets: list[int]) -> None:
        self.app, self.gets = app, gets

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            self.gets.append(1)
            await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": b"Cannot GET /mcp"})
            return
        await self.app(scope, receive, send)


async def test_an_http_downstream_that_answers_its_get_stream_404_is_served_not_reconnected_to(tmp_path: Path) -> None:
    """A handshake-era session's GET stream (for the server's own messages) is optional: a server that answers
    it 404 though it knows the session (it takes POST alone) has not forgotten the session, and is served on
    it, not reconnected to after every connect (each reconnect lost again at once: calls cut, tools relisted)."""
    port = free_port()
    gets: list[int] = []

    def serve() -> Starlette:
        app: Starlette = create_server("UTC").streamable_http_app()
        app.add_middleware(NoGetStream, gets=gets)
        return app

    downstream = TimeOverHttp(port, serve)
    await downstream.start()
    try:
        async with Toolwise(config(tmp_path, port, "legacy")) as app, Client(build_server(app)) as client:
            with anyio.fail_after(WAIT_S):
                while len(gets) < 2:  # the SDK tries its GET stream again after a second: the first 404 was read
                    await asyncio.sleep(0.05)
            result = await client.call_tool(NOW, {"timezone": "UTC"})
            assert not result.is_error, text(result)
            assert app.catalogue.health()[0].restarts == 0
    finally:
        await downstream.stop()


def config(tmp_path: Path, port: int, mode: str, name: str = "time") -> AppConfig:
    return AppConfig.model_validate(
        {
            "mcpServers": {name: {"url": f"http://127.0.0.1:{port}/mcp"}},
            "toolwise": {
                "database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}",
                "mode": mode,
                "snapshot_interval_s": 0,
                "sync_interval_s": 0,
            },
        }
    )


def following_memo(listens: list[int]) -> Starlette:
    """A 2026-07-28 downstream with one resource, memo://x, followed on `subscriptions/listen` streams
    (`listens[-1]` counts the streams this process opened); `touch` says it changed."""
    bus = InMemorySubscriptionBus()
    handler = ListenHandler(bus)
    listens.append(0)

    async def listen(ctx: ServerRequestContext[Any], params: Any) -> Any:
        listens[-1] += 1
        return await handler(ctx, params)

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="touch", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        await bus.publish(ResourceUpdated(uri="memo://x"))
        return types.CallToolResult(content=[types.TextContent(text="touched")])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri="memo://x", name="x")])

    server: Server[Any] = Server(
        "memo",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_subscriptions_listen=listen,
    )
    return server.streamable_http_app()


async def test_a_2026_era_subscription_to_an_http_downstream_restarted_is_followed_again(tmp_path: Path) -> None:
    """A 2026-07-28 connection to an HTTP downstream has no session, so calls go on across its restart; the
    streams toolwise follows on it end with the old process: they are opened again on the new one, and
    the client listening hears the resource's updates again."""
    port = free_port()
    listens: list[int] = []
    downstream = TimeOverHttp(port, lambda: following_memo(listens))
    await downstream.start()
    try:
        async with (
            Toolwise(config(tmp_path, port, "auto", "memo")) as app,
            Client(build_server(app)) as client,
            client.listen(resource_subscriptions=["memo://x"]) as updates,
        ):
            assert listens[-1] >= 1
            await downstream.stop()
            await downstream.start()  # restarted: none of the streams of before
            with anyio.fail_after(WAIT_S):
                while not listens[-1]:  # followed again on the new process
                    await asyncio.sleep(0.05)
            assert text(await client.call_tool("memo__touch", {})) == "touched"
            with anyio.fail_after(WAIT_S):
                event = await anext(aiter(updates))
            assert isinstance(event, ResourceUpdated) and event.uri == "memo://x"
            assert app.catalogue.health()[0].state == "ready"
    finally:
        await downstream.stop()
