"""A real MCP server (stdio, both eras) whose resource and prompts change: `edit_note(text)` changes
`memo://note` and `add_prompt(name)` adds a prompt, each announced as the client's era expects
(notifications on the connection in 2025-11-25, `subscriptions/listen` events in 2026-07-28)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.subscriptions import PromptsListChanged, ResourceUpdated

NOTE = "memo://note"
ARG = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
TOOLS = [
    types.Tool(name="edit_note", description="Change memo://note", input_schema=ARG),
    types.Tool(name="add_prompt", description="Add a prompt", input_schema=ARG),
]
note = ["first"]
prompts = [types.Prompt(name="hello", description="Says hello")]
bus = InMemorySubscriptionBus()


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    value = str((params.arguments or {})["value"])
    if params.name == "edit_note":
        note.append(value)
        await bus.publish(ResourceUpdated(uri=NOTE))
        if ctx.protocol_version.startswith("2025"):
            await ctx.session.send_resource_updated(NOTE)
    else:
        prompts.append(types.Prompt(name=value, description="added at run time"))
        await bus.publish(PromptsListChanged())
        if ctx.protocol_version.startswith("2025"):
            await ctx.session.send_prompt_list_changed()
    return types.CallToolResult(content=[types.TextContent(text="done")])


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=NOTE, name="note", mime_type="text/plain")])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=NOTE, mime_type="text/plain", text=note[-1])]
    )


async def subscription(ctx: ServerRequestContext[Any], params: Any) -> types.EmptyResult:
    return types.EmptyResult()


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=prompts)


async def main() -> None:
    server = Server(
        "changing",
        version="1",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscription,
        on_unsubscribe_resource=subscription,
        on_list_prompts=list_prompts,
        on_subscriptions_listen=ListenHandler(bus),
    )
    options = NotificationOptions(prompts_changed=True, resources_changed=True)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(options))


if __name__ == "__main__":
    anyio.run(main)
