"""Where a passed-through request goes when toolwise has not listed anything yet: a client that reads a
resource URI it knows (from an earlier run, from a previous connection, from its own config) without
listing first reaches the downstream that lists it, as a prompt asked for by name does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext

from tests.server.surface import running
from toolwise.config import InProcessServer

WAIT_S = 10.0


def notes(name: str, uri: str) -> Server[Any]:
    """A downstream with one resource, `uri`, whose text names the server."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri=uri, name=name)])

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text=f"from {name}")])

    return Server(name, on_list_tools=list_tools, on_list_resources=list_resources, on_read_resource=read_resource)


async def test_a_listed_resource_read_before_any_list_reaches_its_downstream(tmp_path: Path) -> None:
    downstreams = {
        "a": InProcessServer(notes("a", "notes://a/today")),
        "b": InProcessServer(notes("b", "notes://b/today")),
    }
    async with running(tmp_path, {}, in_process=downstreams) as (_, client):  # it never lists resources
        with anyio.fail_after(WAIT_S):
            read = await client.read_resource("notes://b/today")
    assert [c.text for c in read.contents] == ["from b"]  # type: ignore[union-attr]
