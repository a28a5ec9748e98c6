"""A downstream of the 2026-07-28 era that needs input mid-call answers `input_required`. Through
toolwise a caller of that era gets the answer as the downstream gave it and finishes the exchange by
retrying; a handshake-era caller is asked mid-call instead. Either way the call is one execution.
The downstream is an SDK server in-process; it also answers without the era's `resultType` tag, as
servers part-way through the upgrade do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ValidationError

from tests.server.surface import rows, running, text
from toolwise import sdk
from toolwise.config import InProcessServer
from toolwise.server.app import build_server

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def asking_server(rounds: list[dict[str, Any] | None]) -> Server[Any]:
    """`greet` and the prompt `greeting` ask for a name first; `rounds` gets each call's responses."""

    def ask() -> types.InputRequiredResult:
        params = types.ElicitRequestFormParams(message="What is your name?", requested_schema=NAME_SCHEMA)
        return types.InputRequiredResult(
            input_requests={"user_name": types.ElicitRequest(params=params)}, request_state="asked-once"
        )

    def name_in(params: types.CallToolRequestParams | types.GetPromptRequestParams) -> str | None:
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
        name = name_in(params)
        return ask() if name is None else types.CallToolResult(content=[types.TextContent(text=f"Hello, {name}!")])

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="greeting")])

    async def get_prompt(
        ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        name = name_in(params)
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
    rounds: list[dict[str, Any] | None] = []
    servers = {"asking": InProcessServer(asking_server(rounds))}
    async with (
        running(tmp_path, {}, in_process=servers) as (app, _),
        Client(build_server(app), mode=era, elicitation_callback=answer) as client,
    ):
        assert text(await client.call_tool("asking__greet", {})) == "Hello, Ada!"
        prompt = await client.get_prompt("asking__greeting")
    assert prompt.messages[0].content == types.TextContent(text="Greet Ada")
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


async def test_a_2026_downstream_sees_what_the_caller_declared_not_what_toolwise_can_relay(tmp_path: Path) -> None:
    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="caps", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        declared = sorted(((ctx.params or {}).get("_meta") or {}).get(CLIENT_CAPABILITIES_META_KEY) or {})
        return types.CallToolResult(content=[types.TextContent(text=",".join(declared))])

    servers = {"caps": InProcessServer(Server("caps", on_list_tools=list_tools, on_call_tool=call_tool))}
    async with running(tmp_path, {}, in_process=servers) as (app, _):
        async with Client(build_server(app), mode="auto") as plain:
            assert "elicitation" not in text(await plain.call_tool("caps__caps", {}))
        async with Client(build_server(app), mode="auto", elicitation_callback=answer) as asking:
            assert "elicitation" in text(await asking.call_tool("caps__caps", {}))
        async with Client(build_server(app), mode="legacy") as handshake:  # toolwise relays to it mid-call
            assert "elicitation" in text(await handshake.call_tool("caps__caps", {}))
