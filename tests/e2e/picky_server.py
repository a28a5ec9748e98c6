"""A real MCP server (stdio) that is strict about arguments: `strict` declares an integer `n`;
`picky` declares nothing but answers JSON-RPC invalid params (-32602) unless given `ok`; `seen`
says how many calls of the other two reached it. The downstream for the bad-arguments tests."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

TOOLS = [
    types.Tool(
        name="strict",
        description="Needs an integer n.",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    ),
    types.Tool(name="picky", description="Refuses anything without ok.", input_schema={"type": "object"}),
    types.Tool(name="seen", description="Calls of strict and picky received.", input_schema={"type": "object"}),
]
received = [0]  # calls of strict and picky that reached this server


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    arguments = params.arguments or {}
    if params.name == "seen":
        return types.CallToolResult(content=[types.TextContent(text=str(received[0]))])
    received[0] += 1
    if params.name == "picky" and not arguments.get("ok"):
        raise MCPError(code=INVALID_PARAMS, message="picky needs ok")
    return types.CallToolResult(content=[types.TextContent(text="fine")])


async def main() -> None:
    server = Server("picky", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
