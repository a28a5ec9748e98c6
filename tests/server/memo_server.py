"""A downstream with one subscribable resource, and a client's ear for its updates: the servers of the
subscription tests (tests/server/test_subscriptions.py, test_input_rounds.py)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPDeprecationWarning


def memo(
    subscribed: list[ServerSession],
    asked: asyncio.Event | None = None,
    answer: asyncio.Event | None = None,
    *,
    uri: str = "memo://x",
    unsubscribes: bool = True,
) -> Server[Any]:
    """A downstream with one resource, `uri`: `touch` tells its subscribers it changed; a subscription
    is taken once `answer` is set (`asked` says one came; without them, at once); `unsubscribes` False:
    it refuses unsubscriptions (as a server that does not implement them, or one that restarted, does)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="touch", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        for session in subscribed:
            await session.send_resource_updated(uri)
        return types.CallToolResult(content=[types.TextContent(text=f"told {len(subscribed)}")])

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        if asked is not None:
            asked.set()
        if answer is not None:
            await answer.wait()
        subscribed.append(ctx.session)
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        if not unsubscribes:
            raise ValueError(f"no unsubscribing from {uri} here")
        subscribed.pop()  # toolwise is its one subscriber (the SDK's session object may differ per request)
        return types.EmptyResult()

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri=uri, name="x")])

    return Server(
        "memo",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
    )


class Updates:
    """A client's message handler: the resources it was told changed, in order."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.heard.append(message.params.uri)


async def subscribe(client: Client, uri: str) -> None:
    with warnings.catch_warnings():  # the handshake era's way
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.subscribe_resource(uri)
