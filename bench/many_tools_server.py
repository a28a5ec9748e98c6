"""An MCP server over stdio with N trivial tools (`tool_0000` …, each echoing its text): the downstream
for bench/scale.py's large catalogue (and, in-process, bench/overhead.py's).

    python bench/many_tools_server.py 500
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

TOPICS = ("file", "git", "time", "search", "mail", "calendar", "image", "database", "http", "math", "text", "audio")
VERBS = ("read", "write", "list", "find", "convert", "delete", "summarise", "translate", "check", "count")


def catalogue(n: int) -> list[types.Tool]:
    """N tools with distinct names and descriptions made of a few shared words (a lexical index sees a
    realistic vocabulary)."""
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    return [
        types.Tool(
            name=f"tool_{i:04d}",
            description=f"{VERBS[i % len(VERBS)]} {TOPICS[(i // len(VERBS)) % len(TOPICS)]} items, variant {i}",
            input_schema=schema,
        )
        for i in range(n)
    ]


def build(n: int) -> Server[Any]:
    """The server as an SDK object (bench/overhead.py also runs it in-process)."""
    tools = catalogue(n)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=str((params.arguments or {}).get("text", "")))])

    return Server("many", version="1", on_list_tools=list_tools, on_call_tool=call_tool)


async def main(n: int) -> None:
    server = build(n)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 500)
