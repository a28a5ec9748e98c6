"""A real MCP server (stdio, handshake era) that asks its client things: during a call
(`ask_now`: sampling) and after one (`ask_later`: roots, once no call is in flight). It answers
what its client said, or the error it got. The downstream for toolwise's relay tests."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

TOOLS = [
    types.Tool(name="ask_now", description="Ask the client's LLM during this call", input_schema={"type": "object"}),
    types.Tool(name="ask_later", description="Ask the client's roots after this call", input_schema={"type": "object"}),
    types.Tool(name="what_happened", description="What asking later brought", input_schema={"type": "object"}),
]
later: list[str] = []
tasks: set[asyncio.Task[None]] = set()


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "ask_now":
        message = types.SamplingMessage(role="user", content=types.TextContent(text="say hi"))
        try:
            reply = await ctx.session.create_message([message], max_tokens=10, related_request_id=ctx.request_id)
        except MCPError as exc:
            return _text(f"refused: {exc.error.message}")
        return _text(f"answered: {reply.content.text}")  # type: ignore[union-attr]
    if params.name == "ask_later":

        async def ask() -> None:
            await anyio.sleep(0.3)
            try:
                roots = await ctx.session.list_roots()
                later.append(f"answered: {roots.roots}")
            except MCPError as exc:
                later.append(f"refused: {exc.error.message}")

        task = asyncio.create_task(ask())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return _text("will ask")
    return _text(later[-1] if later else "nothing yet")


async def main() -> None:
    server = Server("asking", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
