"""A real MCP server (stdio, both eras) with one tool per behaviour a proxy must carry: `echo` answers
(its text and the server's TOY_NAME), `fail` answers a tool error, `crash` answers a JSON-RPC error,
`sleep` waits (and notes in TOY_LOG that it was cancelled, if it was), `malformed` answers structured
content that breaks its own output schema, `add_tool` adds a tool and
announces it as the client's era expects, and `recommend_tool` has the name of one of toolwise's own.
The downstream of the in-process tests of the MCP surface (tests/server/test_app.py and siblings), served
in-process (`served`); `main` serves it over stdio (tests/server/test_sdk.py's spawn hook)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR

if TYPE_CHECKING:  # toolwise.config imports the feedback store (SQLAlchemy): 1.5 s the process needs not spend
    from toolwise.config import InProcessServer


def _tool(tool: str, description: str, **properties: str) -> types.Tool:
    schema: dict[str, Any] = {"type": "object"}
    if properties:
        schema["properties"] = {key: {"type": kind} for key, kind in properties.items()}
        schema["required"] = list(properties)
    return types.Tool(name=tool, description=description, input_schema=schema)


def _tools(bulk: int) -> list[types.Tool]:
    tools = [
        _tool("echo", "Answer the text unchanged, and say which server answered.", text="string"),
        _tool("fail", "Answer a tool error with the reason given.", reason="string"),
        _tool("crash", "Answer a JSON-RPC internal error instead of a result."),
        _tool("sleep", "Wait this many seconds, then answer.", seconds="number"),
        _tool("add_tool", "Add a tool with this name to the server.", name="string"),
        types.Tool(
            name="malformed",
            description="Answer a count that is not a number, although the output schema says it is.",
            input_schema={"type": "object"},
            output_schema={"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        ),
        _tool("recommend_tool", "A downstream tool with the name of one of toolwise's own."),
    ]
    return tools + [  # a large catalogue on demand
        _tool(f"bulk_{i:04d}", f"Bulk tool number {i} of a large catalogue.", text="string") for i in range(bulk)
    ]


def _text(text: str, *, error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=error)


def build(name: str = "toy", log: Path | None = None, bulk: int = 0) -> Server[Any]:
    """The toy server as an SDK `Server` object, with state of its own (a tool added is added to this one
    alone): served over stdio by `main`, or in-process by toolwise (`InProcessServer`)."""
    tools = _tools(bulk)
    bus = InMemorySubscriptionBus()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        args = params.arguments or {}
        if params.name == "echo":
            return types.CallToolResult(
                content=[types.TextContent(text=str(args["text"]))], structured_content={"server": name}
            )
        if params.name == "fail":
            return _text(f"failed: {args['reason']}", error=True)
        if params.name == "malformed":
            return types.CallToolResult(content=[types.TextContent(text="many")], structured_content={"count": "many"})
        if params.name == "crash":
            raise MCPError(INTERNAL_ERROR, "the toy server crashed on purpose")
        if params.name == "sleep":
            try:
                await anyio.sleep(float(args["seconds"]))
            except anyio.get_cancelled_exc_class():
                if log is not None:
                    with anyio.CancelScope(shield=True):  # the scope stays cancelled: only a shielded write runs
                        await anyio.Path(log).write_text("sleep cancelled")
                raise
            return _text("slept")
        if params.name == "add_tool":
            tools.append(_tool(str(args["name"]), "Added at run time."))
            await bus.publish(ToolsListChanged())  # 2026-07-28: subscriptions/listen streams
            await ctx.session.send_tool_list_changed()  # handshake era: a notification on the connection
            return _text(f"added {args['name']}")
        return _text(f"the toy server's {params.name}")

    return _Toy(
        "toy", version="1", on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(bus)
    )


class _Toy(Server[Any]):
    """Announces tool-list changes however it is served (stdio, or in-process, where the SDK asks for the
    default options)."""

    def create_initialization_options(self, *args: Any, **kwargs: Any) -> InitializationOptions:
        if not args and kwargs.get("notification_options") is None:
            kwargs["notification_options"] = NotificationOptions(tools_changed=True)
        return super().create_initialization_options(*args, **kwargs)


async def main() -> None:
    log = os.environ.get("TOY_LOG")
    server = build(os.environ.get("TOY_NAME", "toy"), Path(log) if log else None, int(os.environ.get("TOY_BULK", "0")))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def spec(name: str = "toy", log: Path | None = None, bulk: int = 0, **extra: Any) -> dict[str, Any]:
    """The mcpServers entry that starts this server as a process under `name` (for the end-to-end tests
    that need one; `log`: where `sleep` notes a cancel; `bulk`: that many more tools)."""
    env = {"TOY_NAME": name, "TOY_BULK": str(bulk), **({"TOY_LOG": str(log)} if log is not None else {})}
    return {"command": sys.executable, "args": [__file__], "env": env, **extra}


def served(name: str = "toy", log: Path | None = None, bulk: int = 0, prefix: str | None = None) -> InProcessServer:
    """A toy downstream for toolwise to serve in-process (`log`: where `sleep` notes a cancel; `bulk`: that
    many more tools, `bulk_0000` …; `prefix`: its tools' prefix instead of its name)."""
    from toolwise.config import InProcessServer  # here, not at the top: the stdio process never needs it

    return InProcessServer(build(name, log, bulk), prefix=prefix)


if __name__ == "__main__":
    anyio.run(main)
