"""A downstream that needs input mid-call answers a 2026-07-28 request `input_required` and asks a
handshake-era one mid-call, as servers speaking both eras do. Through toolwise each caller meets the
downstream's code of its own era, as it would directly: a 2026-era caller gets the answer as the
downstream gave it and finishes the exchange by retrying; a handshake-era caller is asked mid-call,
on a handshake-era connection of its own (`downstream/twin.py`). Either way the call is one
execution. The downstreams are SDK servers in-process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.jsonrpc import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from tests.server.memo_server import Updates, memo, subscribe
from tests.server.surface import rows, running, text
from toolwise import sdk
from toolwise.config import InProcessServer
from toolwise.downstream.twin import Twin
from toolwise.server.build import build_server

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def asking_server(rounds: list[dict[str, Any] | str | None]) -> Server[Any]:
    """`greet` and the prompt `greeting` ask for a name first; `rounds` gets each 2026-era round's
    responses, and "mid-call" for each handshake-era request (asked on its connection)."""

    def ask() -> types.InputRequiredResult:
        params = types.ElicitRequestFormParams(message="What is your name?", requested_schema=NAME_SCHEMA)
        return types.InputRequiredResult(
            input_requests={"user_name": types.ElicitRequest(params=params)}, request_state="asked-once"
        )

    async def name_in(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams | types.GetPromptRequestParams
    ) -> str | None:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # the handshake era: asked on the connection
            rounds.append("mid-call")
            asked = await ctx.session.elicit_form("What is your name?", NAME_SCHEMA, ctx.request_id)
            return str((asked.content or {}).get("name"))
        responses = params.input_responses or {}
        rounds.append({k: v.model_dump(by_alias=True, exclude_none=True) for k, v in responses.items()} or None)
        answer = responses.get("user_name")
        if not isinstance(answer, types.ElicitResult) or params.request_state != "asked-once":
            return None
        return str((answer.content or {}).get("name"))

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="greet", input_schema={"type": "object"})])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        if params.request_state not in (None, "asked-once"):
            raise MCPError(INVALID_PARAMS, "requestState tampered with")
        name = await name_in(ctx, params)
        return ask() if name is None else types.CallToolResult(content=[types.TextContent(text=f"Hello, {name}!")])

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="greeting")])

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name = await name_in(ctx, params)
        if name is None:
            return ask()
        message = types.PromptMessage(role="user", content=types.TextContent(text=f"Greet {name}"))
        return types.GetPromptResult(messages=[message])

    return Server(
        "asking",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
    )


async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


@pytest.mark.parametrize("era", ["auto", "legacy"], ids=["2026-07-28 caller", "handshake-era caller"])
async def test_a_call_that_needs_input_finishes_through_toolwise_and_is_one_execution(tmp_path: Path, era: str) -> None:
    rounds: list[dict[str, Any] | str | None] = []
    servers = {"asking": InProcessServer(asking_server(rounds))}
    async with (
        running(tmp_path, {}, in_process=servers) as (app, _),
        Client(build_server(app), mode=era, elicitation_callback=answer) as client,
    ):
        assert text(await client.call_tool("asking__greet", {})) == "Hello, Ada!"
        prompt = await client.get_prompt("asking__greeting")
    assert prompt.messages[0].content == types.TextContent(text="Greet Ada")
    if era == "legacy":  # asked on its own era's connection, once a request
        assert rounds == ["mid-call", "mid-call"]
    else:
        assert [r is None for r in rounds] == [True, False, True, False]  # asked, answered; twice
        assert rounds[1] == {"user_name": {"action": "accept", "content": {"name": "Ada"}}}
    assert rows(tmp_path, "SELECT tool, success FROM executions") == [("asking__greet", 1)]


async def test_a_2026_caller_sees_the_downstreams_own_request_and_state(tmp_path: Path) -> None:
    servers = {"asking": InProcessServer(asking_server([]))}
    async with running(tmp_path, {}, in_process=servers) as (app, _), Client(build_server(app), mode="auto") as client:
        first = await client.session.call_tool("asking__greet", {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult)
        assert first.request_state == "asked-once" and list(first.input_requests or {}) == ["user_name"]
        responses: types.InputResponses = {"user_name": types.ElicitResult(action="accept", content={"name": "Bo"})}
        last = await client.session.call_tool(
            "asking__greet", {}, input_responses=responses, request_state="asked-once", allow_input_required=True
        )
        with pytest.raises(MCPError, match="tampered"):  # the downstream's refusal of a round, as it gave it
            await client.session.call_tool(
                "asking__greet", {}, input_responses=responses, request_state="forged", allow_input_required=True
            )
    assert isinstance(last, types.CallToolResult) and text(last) == "Hello, Bo!"
    # the asking round is not a call of its own; the refused round is recorded, failed
    assert rows(tmp_path, "SELECT success FROM executions ORDER BY seq") == [(1,), (0,)]


async def test_an_answer_without_the_eras_tag_is_read_as_complete() -> None:
    told: list[str] = []

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="plain", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="untagged")])

    server: Server[Any] = Server("untagged", on_list_tools=list_tools, on_call_tool=call_tool)
    async with Client(server, mode="auto") as client:
        assert client.protocol_version == "2026-07-28"
        dispatcher: Any = client.session._dispatcher  # the wire, as a half-upgraded server answers on it
        send = dispatcher.send_raw_request

        async def untagged(method: str, params: Any, opts: Any) -> Any:
            raw = await send(method, params, opts)
            raw.pop("resultType", None)
            return raw

        dispatcher.send_raw_request = untagged
        with pytest.raises(ValidationError, match="resultType"):
            await client.call_tool("plain", {})
        sdk.tolerate_untagged_results(client, told.append)
        assert text(await client.call_tool("plain", {})) == "untagged"
        assert text(await client.call_tool("plain", {})) == "untagged"
    assert told == ["tools/call"]  # reported once


async def test_a_downstream_meets_each_caller_in_its_era_with_what_that_caller_declared(tmp_path: Path) -> None:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="caps", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # declared per request
            declared = sorted(((ctx.params or {}).get("_meta") or {}).get(CLIENT_CAPABILITIES_META_KEY) or {})
        else:  # declared at the handshake
            caps = ctx.session.client_capabilities
            declared = sorted(caps.model_dump(exclude_none=True)) if caps is not None else []
        return types.CallToolResult(content=[types.TextContent(text=f"{ctx.protocol_version} {','.join(declared)}")])

    servers = {"caps": InProcessServer(Server("caps", on_list_tools=list_tools, on_call_tool=call_tool))}
    async with running(tmp_path, {}, in_process=servers) as (app, _):
        async with Client(build_server(app), mode="auto") as plain:
            seen = text(await plain.call_tool("caps__caps", {}))
            assert seen.startswith("2026-07-28") and "elicitation" not in seen
        async with Client(build_server(app), mode="auto", elicitation_callback=answer) as asking:
            assert "elicitation" in text(await asking.call_tool("caps__caps", {}))
        async with Client(build_server(app), mode="legacy") as handshake:  # toolwise relays to it mid-call
            seen = text(await handshake.call_tool("caps__caps", {}))
            assert seen.startswith("2025-11-25") and "elicitation" in seen


async def test_a_handshake_era_caller_subscribes_as_it_would_directly(tmp_path: Path) -> None:
    """A downstream that takes handshake-era subscriptions (and has no 2026-07-28 listen streams) tells
    the subscribed connection of changes; through toolwise, the caller that subscribed hears them."""
    subscribed: list[ServerSession] = []
    updates = Updates()
    downstream = {"memo": InProcessServer(memo(subscribed))}
    async with running(tmp_path, {}, in_process=downstream, heard=updates) as (_, client):
        await subscribe(client, "memo://x")
        assert text(await client.call_tool("memo__touch", {})) == "told 1"
        with anyio.fail_after(5):
            while not updates.heard:
                await anyio.sleep(0.01)
    assert updates.heard == ["memo://x"]


async def test_a_downstream_that_refuses_the_handshake_serves_handshake_era_callers_on_its_2026_connection() -> None:
    def target(stack: Any, session_lost: Any) -> Any:
        raise ConnectionRefusedError("no handshake here")

    async def relay(message: Any) -> None:
        raise AssertionError(f"nothing to relay: {message}")

    twin = Twin("modern-only", target, {}, relay, open_timeout_s=5)
    assert await twin.client() is None
    assert twin.refused == "connection refused"
    assert await twin.client() is None  # not tried again until the main connection is renewed
    twin.close()
    assert twin.refused is None
