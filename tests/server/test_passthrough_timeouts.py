"""A resource read, a prompt or a completion that the downstream never answers is bounded as a tool call
is: after `call_timeout_s` the caller gets an MCP error naming the downstream and the setting, and the
downstream is told to stop. In-process through `Client(server)`, the downstream an SDK server whose
requests wait until cancelled."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, REQUEST_TIMEOUT

from tests.server.surface import running
from toolwise.config import InProcessServer
from toolwise.server.build import build_server

WAIT_S = 10.0  # the longest a step of the test waits for what it expects


def stuck(cancelled: list[str]) -> Server[Any]:
    """A downstream with a resource, a prompt and completions that never answer; `cancelled` gets the
    method of each request the downstream was told to stop."""

    async def never(method: str) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(method)
            raise
        raise AssertionError("never answers")

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri="memo://x", name="x")])

    async def read_resource(ctx: ServerRequestContext[Any], params: Any) -> types.ReadResourceResult:
        return await never("resources/read")  # type: ignore[no-any-return]

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="p")])

    async def get_prompt(ctx: ServerRequestContext[Any], params: Any) -> types.GetPromptResult:
        return await never("prompts/get")  # type: ignore[no-any-return]

    async def complete(ctx: ServerRequestContext[Any], params: Any) -> types.CompleteResult:
        return await never("completion/complete")  # type: ignore[no-any-return]

    return Server(
        "stuck",
        on_list_tools=list_tools,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_completion=complete,
    )


ASKS: dict[str, Callable[[Client], Awaitable[object]]] = {
    "resources/read": lambda client: client.read_resource("memo://x"),
    "prompts/get": lambda client: client.get_prompt("stuck__p"),
    "completion/complete": lambda client: client.complete(
        types.PromptReference(name="stuck__p"), {"name": "a", "value": ""}
    ),
}


@pytest.mark.parametrize("era", ["auto", "legacy"], ids=["2026-07-28 caller", "handshake-era caller"])
@pytest.mark.parametrize("method", list(ASKS))
async def test_a_passed_through_request_the_downstream_never_answers_times_out(
    tmp_path: Path, era: str, method: str
) -> None:
    cancelled: list[str] = []
    downstream = {"stuck": InProcessServer(stuck(cancelled))}
    async with (
        running(tmp_path, {}, in_process=downstream, call_timeout_s=0.5) as (app, _),
        Client(build_server(app), mode=era) as client,
    ):
        with anyio.fail_after(WAIT_S), pytest.raises(MCPError) as refused:
            await ASKS[method](client)
        assert refused.value.error.code == REQUEST_TIMEOUT
        assert "'stuck'" in str(refused.value) and "0.5s (call_timeout_s)" in str(refused.value)
        with anyio.fail_after(WAIT_S):
            while not cancelled:
                await anyio.sleep(0.01)
    assert cancelled == [method]


def partly_broken(name: str) -> Server[Any]:
    """A downstream with a resource and a prompt whose lists fail: resources/list with an error, prompts/list
    never answered."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        raise MCPError(INTERNAL_ERROR, "the resource index is locked")

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    return Server(name, on_list_tools=list_tools, on_list_resources=list_resources, on_list_prompts=list_prompts)


def healthy(name: str) -> Server[Any]:
    """A downstream with a resource and a prompt."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri="memo://ok", name="ok")])

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="p")])

    return Server(name, on_list_tools=list_tools, on_list_resources=list_resources, on_list_prompts=list_prompts)


async def test_one_downstream_whose_lists_fail_or_hang_leaves_the_others_listed_and_is_named(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    downstreams = {"good": InProcessServer(healthy("good")), "broken": InProcessServer(partly_broken("broken"))}
    async with running(tmp_path, {}, in_process=downstreams, call_timeout_s=0.5) as (_, client):
        with anyio.fail_after(WAIT_S):
            resources = await client.list_resources()
            prompts = await client.list_prompts()
    assert [r.uri for r in resources.resources] == ["memo://ok"]
    assert [p.name for p in prompts.prompts] == ["good__p"]
    said = caplog.text
    assert "broken" in said and "the resource index is locked" in said and "0.5s (call_timeout_s)" in said


def logging_server(name: str, levels: list[str], *, fails: bool) -> Server[Any]:
    """A downstream that logs: `levels` gets each level it is set to; `fails`: its logging/setLevel fails."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def set_level(ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams) -> types.EmptyResult:
        if fails:
            raise MCPError(INTERNAL_ERROR, "the log sink is read-only")
        levels.append(params.level)
        return types.EmptyResult()

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        return Server(name, on_list_tools=list_tools, on_set_logging_level=set_level)


async def test_one_downstream_refusing_a_log_level_leaves_the_others_set_and_the_client_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    levels: list[str] = []
    downstreams = {
        "a": InProcessServer(logging_server("a", [], fails=True)),
        "b": InProcessServer(logging_server("b", levels, fails=False)),
    }
    async with running(tmp_path, {}, in_process=downstreams, mode="legacy", call_timeout_s=0.5) as (_, client):
        with anyio.fail_after(WAIT_S), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("warning")
    assert levels == ["warning"]
    assert "'a'" in caplog.text and "the log sink is read-only" in caplog.text
