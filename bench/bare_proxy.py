"""The baseline proxy for bench/overhead.py: forwards tools/list and tools/call to one downstream
over the same SDK, and does nothing else (no recording, no learning)."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server


def proxy(client: Client) -> Server[Any]:
    """The bare proxy over a connected client of the downstream: tools/list and tools/call forwarded."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return await client.list_tools()

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return await client.call_tool(params.name, params.arguments)

    return Server("bare-proxy", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    downstream = StdioServerParameters(command=sys.executable, args=sys.argv[1:])
    async with Client(downstream) as client:
        server = proxy(client)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
