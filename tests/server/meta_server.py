"""A real MCP server (stdio, both eras) that shows what reached it: `meta` answers the request's
`_meta` as it came on the wire (structured content), `fail` answers a tool error. The downstream of the
tracing tests: a trace context toolwise passes on is visible in what `meta` answers."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

TOOLS = [
    types.Tool(name="meta", description="Answer the request's _meta as it arrived.", input_schema={"type": "object"}),
    types.Tool(name="fail", description="Answer a tool error.", input_schema={"type": "object"}),
]


def build() -> Server[Any]:
    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "fail":
            return types.CallToolResult(content=[types.TextContent(text="failed on purpose")], is_error=True)
        meta = dict((ctx.params or {}).get("_meta") or {})
        return types.CallToolResult(content=[types.TextContent(text=str(meta))], structured_content=meta)

    return Server("meta", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    server = build()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def spec() -> dict[str, Any]:
    """The mcpServers entry that starts this server."""
    return {"command": sys.executable, "args": [__file__]}


if __name__ == "__main__":
    anyio.run(main)
