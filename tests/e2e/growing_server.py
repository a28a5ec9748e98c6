"""A real MCP server (stdio) whose tool list grows: calling `add_tool(name)` adds a tool and
announces the change in both protocol eras. The downstream for toolwise's list_changed tests."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

ADD = types.Tool(
    name="add_tool",
    description="Add a tool named `name` to this server.",
    input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)
tools: list[types.Tool] = [ADD]
bus = InMemorySubscriptionBus()


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    name = str((params.arguments or {}).get("name", "extra"))
    tools.append(types.Tool(name=name, description=f"added at run time: {name}", input_schema={"type": "object"}))
    await bus.publish(ToolsListChanged())  # 2026-07-28: subscriptions/listen streams
    await ctx.session.send_tool_list_changed()  # handshake era: a notification on the connection
    return types.CallToolResult(content=[types.TextContent(text=f"added {name}")])


async def main() -> None:
    server = Server(
        "growing",
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=ListenHandler(bus),
    )
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(NotificationOptions(tools_changed=True)))


if __name__ == "__main__":
    anyio.run(main)
