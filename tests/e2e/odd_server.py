"""A real MCP server (stdio) that misbehaves on request, for the downstream edge-case tests.

ODD_START: "exit:N" exits with status N before serving; "wait:PATH" does not read its stdin (so never
answers initialize) while the file PATH exists. ODD_SAY: a line written to stderr first, `{VAR}` filled from
the environment (a server that logs the key it was given). Tools: `ping` answers "pong"; `junk(n)` prints n lines
that are not JSON-RPC on stdout, then answers. The SDK is imported only once it is to serve.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

# The SDK's stdio_server points fd 1 at stderr while it serves (so stray prints cannot break the
# protocol); a server in another language has no such guard. A copy of the real stdout, made first,
# lets this one print junk on the wire as those do.
WIRE = os.dup(1)


async def list_tools(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    return types.ListToolsResult(
        tools=[
            types.Tool(name="ping", description="Answers pong.", input_schema={"type": "object"}),
            types.Tool(
                name="junk",
                description="Prints n lines that are not JSON-RPC on stdout.",
                input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            ),
        ]
    )


async def call_tool(ctx: Any, params: Any) -> Any:
    import mcp_types as types

    if params.name == "junk":
        lines = "".join(f"debug: not a protocol line {i}\n" for i in range(int((params.arguments or {}).get("n", 1))))
        os.write(WIRE, lines.encode())
        return types.CallToolResult(content=[types.TextContent(text="printed")])
    return types.CallToolResult(content=[types.TextContent(text="pong")])


async def main() -> None:
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    server = Server("odd", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    # Before the (slow) SDK imports, so that "exit" and "wait" happen at once.
    if "ODD_SAY" in os.environ:
        print(os.environ["ODD_SAY"].format(**os.environ), file=sys.stderr, flush=True)
    how, _, what = os.environ.get("ODD_START", "").partition(":")
    if how == "exit":
        sys.exit(int(what))
    while how == "wait" and os.path.exists(what):
        time.sleep(0.05)
    import anyio

    anyio.run(main)
