"""The server the MCP conformance suite's server scenarios are written against, built with the SDK.

The official SDKs keep their conformance "everything server" in their repositories, not in a
package this machine (or CI) can install, so this one is written from the scenarios' own stated
expectations (`conformance server --scenario NAME` prints them): the tools, resources, prompts,
completion and logging each scenario calls. Handshake era (the scenarios are 2025-11-25's).

    python conformance_server.py                # stdio
    python conformance_server.py --port 3001    # streamable HTTP at /mcp
"""

from __future__ import annotations

import argparse
import asyncio
import json
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from toolwise.server.events import MemoryEventStore

PNG = (  # 1x1 red pixel
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA="  # 44-byte header, no samples
NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}
RETRY_MS = 300  # the `retry` a resuming client waits before it reconnects


def _tool(name: str, description: str, schema: dict[str, Any] | None = None) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema=schema or NO_ARGS)


def _string_args(*names: str) -> dict[str, Any]:
    return {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": list(names)}


TOOLS = [
    _tool("test_simple_text", "Returns simple text"),
    _tool("test_image_content", "Returns an image"),
    _tool("test_audio_content", "Returns audio"),
    _tool("test_embedded_resource", "Returns an embedded resource"),
    _tool("test_multiple_content_types", "Returns text, an image and a resource"),
    _tool("test_tool_with_logging", "Logs three messages while it runs"),
    _tool("test_tool_with_progress", "Reports progress while it runs"),
    _tool("test_error_handling", "Always fails"),
    _tool("test_sampling", "Asks the client's LLM", _string_args("prompt")),
    _tool("test_elicitation", "Asks the user", _string_args("message")),
    _tool("test_elicitation_sep1034_defaults", "Asks the user, with defaults"),
    _tool("test_elicitation_sep1330_enums", "Asks the user, with enums"),
    _tool("test_reconnection", "Closes its stream mid-call and answers once the client has resumed it"),
    _tool(
        "json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features",
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "$defs": {
                "address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}
            },
            "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
            "additionalProperties": False,
        },
    ),
]

DEFAULTS_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "default": True},
    },
}
ENUMS_SCHEMA = {
    "type": "object",
    "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {
            "type": "string",
            "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ],
        },
        "legacyEnum": {
            "type": "string",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"],
        },
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"},
                ]
            },
        },
    },
}


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _resource(uri: str, mime: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(resource=types.TextResourceContents(uri=uri, mime_type=mime, text=text))


async def _elicit(ctx: ServerRequestContext[Any], message: str, schema: dict[str, Any]) -> types.ElicitResult:
    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)


STATIC = {  # the tools whose result is fixed
    "test_simple_text": _text("This is a simple text response for testing."),
    "test_image_content": types.CallToolResult(content=[types.ImageContent(data=PNG, mime_type="image/png")]),
    "test_audio_content": types.CallToolResult(content=[types.AudioContent(data=WAV, mime_type="audio/wav")]),
    "test_embedded_resource": types.CallToolResult(
        content=[_resource("test://embedded-resource", "text/plain", "This is an embedded resource content.")]
    ),
    "test_multiple_content_types": types.CallToolResult(
        content=[
            types.TextContent(text="Multiple content types test:"),
            types.ImageContent(data=PNG, mime_type="image/png"),
            _resource("test://mixed-content-resource", "application/json", json.dumps({"test": "data", "value": 123})),
        ]
    ),
    "test_error_handling": types.CallToolResult(
        content=[types.TextContent(text="This tool intentionally returns an error for testing")], is_error=True
    ),
}


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name in STATIC:
        return STATIC[params.name]
    if params.name in RUNNING:
        return await RUNNING[params.name](ctx)
    args = params.arguments or {}
    session, rid = ctx.session, ctx.request_id
    match params.name:
        case "test_tool_with_progress":
            token = (ctx.params or {}).get("_meta", {}).get("progressToken")
            for i, progress in enumerate((0, 50, 100)):
                if i:
                    await anyio.sleep(0.05)
                if token is not None:
                    related = None if rid is None else str(rid)
                    await session.send_progress_notification(token, progress, 100, None, related)
            return _text("Tool with progress executed successfully")
        case "test_sampling":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                reply = await session.create_message(
                    [types.SamplingMessage(role="user", content=types.TextContent(text=str(args.get("prompt", ""))))],
                    max_tokens=100,
                    related_request_id=rid,
                )
            text = reply.content.text if isinstance(reply.content, types.TextContent) else str(reply.content)
            return _text(f"LLM response: {text}")
        case "test_elicitation":
            schema = {
                "type": "object",
                "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"},
                },
                "required": ["username", "email"],
            }
            answer = await _elicit(ctx, str(args.get("message", "")), schema)
            return _text(f"User response: action={answer.action}, content={json.dumps(answer.content)}")
        case "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums":
            schema = DEFAULTS_SCHEMA if params.name.endswith("defaults") else ENUMS_SCHEMA
            answer = await _elicit(ctx, "Please review and update the form fields", schema)
            return _text(f"Elicitation completed: action={answer.action}, content={json.dumps(answer.content)}")
        case "json_schema_2020_12_tool":
            return _text(f"received {json.dumps(args)}")
    raise MCPError(INVALID_PARAMS, f"Unknown tool: {params.name}")


async def _logging(ctx: ServerRequestContext[Any]) -> types.CallToolResult:
    for i, message in enumerate(["Tool execution started", "Tool processing data", "Tool execution completed"]):
        if i:
            await anyio.sleep(0.05)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message("info", message, related_request_id=ctx.request_id)
    return _text("Tool with logging executed successfully")


async def _reconnection(ctx: ServerRequestContext[Any]) -> types.CallToolResult:
    """SEP-1699: close the call's stream and answer after the client's reconnection delay, so only
    a client that resumes the stream gets the answer (over stdio there is no stream to close)."""
    if ctx.close_sse_stream is not None:
        await ctx.close_sse_stream()
        await anyio.sleep(RETRY_MS / 1000 * 2)
    return _text("Reconnection test completed: the client resumed the stream")


RUNNING: dict[str, Callable[[ServerRequestContext[Any]], Awaitable[types.CallToolResult]]] = {
    "test_tool_with_logging": _logging,
    "test_reconnection": _reconnection,
}


RESOURCES: dict[str, types.TextResourceContents | types.BlobResourceContents] = {
    "test://static-text": types.TextResourceContents(
        uri="test://static-text", mime_type="text/plain", text="This is the content of the static text resource."
    ),
    "test://static-binary": types.BlobResourceContents(uri="test://static-binary", mime_type="image/png", blob=PNG),
    "test://watched-resource": types.TextResourceContents(
        uri="test://watched-resource", mime_type="text/plain", text="Watched resource content"
    ),
}


async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(
        resources=[
            types.Resource(uri=uri, name=uri.removeprefix("test://"), mime_type=c.mime_type)
            for uri, c in RESOURCES.items()
        ]
    )


async def list_templates(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourceTemplatesResult:
    template = types.ResourceTemplate(
        uri_template="test://template/{id}/data", name="template", mime_type="application/json"
    )
    return types.ListResourceTemplatesResult(resource_templates=[template])


async def read_resource(
    ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    if uri in RESOURCES:
        return types.ReadResourceResult(contents=[RESOURCES[uri]])
    parts = uri.removeprefix("test://template/").split("/")
    if uri.startswith("test://template/") and len(parts) == 2 and parts[1] == "data":
        data = json.dumps({"id": parts[0], "templateTest": True, "data": f"Data for ID: {parts[0]}"})
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=data)]
        )
    raise MCPError(-32002, f"Resource not found: {uri}", {"uri": uri})


async def subscription(ctx: ServerRequestContext[Any], params: Any) -> types.EmptyResult:
    return types.EmptyResult()


PROMPTS = [
    types.Prompt(name="test_simple_prompt", description="A simple prompt"),
    types.Prompt(
        name="test_prompt_with_arguments",
        description="A prompt with arguments",
        arguments=[
            types.PromptArgument(name="arg1", description="First test argument", required=True),
            types.PromptArgument(name="arg2", description="Second test argument", required=True),
        ],
    ),
    types.Prompt(
        name="test_prompt_with_embedded_resource",
        description="A prompt with an embedded resource",
        arguments=[types.PromptArgument(name="resourceUri", description="URI of the resource", required=True)],
    ),
    types.Prompt(name="test_prompt_with_image", description="A prompt with an image"),
]


async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=PROMPTS)


def _user(content: Any) -> types.PromptMessage:
    return types.PromptMessage(role="user", content=content)


async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
    args = params.arguments or {}
    match params.name:
        case "test_simple_prompt":
            messages = [_user(types.TextContent(text="This is a simple prompt for testing."))]
        case "test_prompt_with_arguments":
            text = f"Prompt with arguments: arg1='{args.get('arg1')}', arg2='{args.get('arg2')}'"
            messages = [_user(types.TextContent(text=text))]
        case "test_prompt_with_embedded_resource":
            uri = args.get("resourceUri", "test://example-resource")
            messages = [
                _user(_resource(uri, "text/plain", "Embedded resource content for testing.")),
                _user(types.TextContent(text="Please process the embedded resource above.")),
            ]
        case "test_prompt_with_image":
            messages = [
                _user(types.ImageContent(data=PNG, mime_type="image/png")),
                _user(types.TextContent(text="Please analyze the image above.")),
            ]
        case _:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {params.name}")
    return types.GetPromptResult(messages=messages)


async def complete(ctx: ServerRequestContext[Any], params: types.CompleteRequestParams) -> types.CompleteResult:
    values = [v for v in ("paris", "park", "party") if v.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values), has_more=False))


async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


def build() -> Server[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(
            "conformance-everything",
            version="1.0.0",
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscription,
            on_unsubscribe_resource=subscription,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_level,
        )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int)
    port = parser.parse_args().port
    server = build()
    if port is None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    app = server.streamable_http_app(host="127.0.0.1", event_store=MemoryEventStore(), retry_interval=RETRY_MS)
    await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()


if __name__ == "__main__":
    asyncio.run(main())
