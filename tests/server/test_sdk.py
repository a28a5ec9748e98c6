"""The SDK's private parts toolwise relies on (sdk.py), each used as toolwise uses it: when an SDK
release moves one, the test naming it fails rather than a feature going quiet."""

from __future__ import annotations

import sys
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection

from tests.server import toy_server
from tests.server.surface import text
from toolwise import sdk


async def test_a_request_reaches_the_connection_it_came_on() -> None:
    seen: list[Connection] = []

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="where", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        seen.append(sdk.session_connection(ctx.session))
        return types.CallToolResult(content=[types.TextContent(text=seen[-1].protocol_version or "")])

    server: Server[Any] = Server("pin", on_list_tools=list_tools, on_call_tool=call_tool)
    async with Client(server, mode="legacy") as client:
        answer = await client.call_tool("where", {})
        again = await client.call_tool("where", {})
        version = client.protocol_version
    assert len(seen) == 2 and seen[0] is seen[1]  # one connection, the same object for each request
    assert text(answer) == text(again) == version


async def test_the_http_client_carries_the_headers_and_the_transports_timeouts() -> None:
    async with sdk.http_client(headers={"Authorization": "Bearer t"}) as http:
        assert http.headers["Authorization"] == "Bearer t"
        assert http.timeout.read == 300 and http.timeout.connect == 30
        assert http.follow_redirects is False


async def test_the_spawn_hook_sees_every_stdio_process_the_sdk_starts() -> None:
    spawned: list[Any] = []
    assert sdk.install_spawn_hook(spawned.append)
    assert sdk.install_spawn_hook(spawned.append)  # once only: a second install wraps nothing more
    params = StdioServerParameters(command=sys.executable, args=[toy_server.__file__], env={"TOY_NAME": "toy"})
    async with Client(params, mode="legacy") as client:
        assert (await client.list_tools()).tools
    assert len(spawned) == 1 and isinstance(spawned[0].pid, int)


async def test_a_result_that_breaks_the_tools_output_schema_is_told_apart() -> None:
    schema = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        tool = types.Tool(name="count", input_schema={"type": "object"}, output_schema=schema)
        return types.ListToolsResult(tools=[tool, types.Tool(name="plain", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name == "plain":
            raise RuntimeError("the tool broke")  # a server-side failure: an error response, not a refusal
        structured = {"count": "many"} if (params.arguments or {}).get("wrong") else None
        return types.CallToolResult(content=[types.TextContent(text="many")], structured_content=structured)

    server: Server[Any] = Server("pin", on_list_tools=list_tools, on_call_tool=call_tool)
    refused: list[BaseException] = []
    async with Client(server, mode="legacy") as client:
        await client.list_tools()
        for name, arguments in (("count", {"wrong": True}), ("count", {}), ("plain", {})):
            try:
                await client.call_tool(name, arguments)
            except Exception as exc:
                refused.append(exc)
    assert [sdk.is_result_validation_error(exc) for exc in refused] == [True, True, False], refused
