"""A real MCP server (stdio) whose one tool hangs while the file named by FLAKY_FLAG exists: the
downstream that fails repeatedly and then recovers, for the circuit-breaker test."""

from __future__ import annotations

import os
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

WORK = types.Tool(name="work", description="Do some work.", input_schema={"type": "object"})


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[WORK])


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if await anyio.Path(os.environ["FLAKY_FLAG"]).exists():
        await anyio.sleep(30)
    return types.CallToolResult(content=[types.TextContent(text="done")])


async def main() -> None:
    server = Server("flaky", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
