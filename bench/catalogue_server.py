"""A fake downstream over stdio serving a whole catalogue (a `tools.jsonl` of bench/data/): the
downstream for bench/real_queries.py. A call succeeds only if the called tool is one the request
wanted: the caller names them in the argument `expect` (the agent's judge; toolwise does not read
arguments), so toolwise learns from outcomes exactly as it would from a real tool.

    python bench/catalogue_server.py bench/data/bfcl_live/tools.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

JSON_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "any": "string"}


def json_schema(schema: Any) -> Any:
    """Data-set schemas use Python type names (`dict`, `float`); MCP wants JSON Schema."""
    if isinstance(schema, dict):
        fixed = {k: json_schema(v) for k, v in schema.items()}
        if isinstance(fixed.get("type"), str):
            fixed["type"] = JSON_TYPES.get(fixed["type"], fixed["type"])
        return fixed
    if isinstance(schema, list):
        return [json_schema(v) for v in schema]
    return schema


def load_tools(path: Path) -> list[types.Tool]:
    tools = []
    for line in path.read_text().splitlines():
        spec = json.loads(line)
        schema = json_schema(spec.get("parameters") or {})
        # The agent's call carries only the judge's `expect`: nothing is required and nothing else is
        # refused, so toolwise's argument check (run before forwarding) lets every call through.
        schema = {k: v for k, v in schema.items() if k not in ("required", "additionalProperties")}
        schema = {**schema, "type": "object"}
        tools.append(types.Tool(name=spec["name"], description=spec.get("description", ""), input_schema=schema))
    return tools


async def main(path: Path) -> None:
    tools = load_tools(path)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        wanted = (params.arguments or {}).get("expect") or []
        if params.name in wanted:
            return types.CallToolResult(content=[types.TextContent(text="done")])
        return types.CallToolResult(content=[types.TextContent(text="not what was asked")], is_error=True)

    server = Server("catalogue", version="1", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
