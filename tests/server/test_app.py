"""The MCP surface of `build_server`: tools/list, a proxied tools/call and what it records, errors as
`is_error` results, cancellation. In-process through `Client(server)`, real downstream processes."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from tests.server import toy_server
from tests.server.surface import execution_of, ok, rows, running, serving, text, time_server
from toolwise.learning.sessions import Session, session_meta
from toolwise.server.own import Input, Output
from toolwise.server.services import Services

OWN = {"recommend_tool", "recommend_next_tools", "submit_feedback", "end_session"}
ADMIN = {"get_learning_stats", "get_tool_metrics", "get_successful_sequences"}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_tools_list_offers_our_tools_and_each_downstream_tool_as_server__tool(tmp_path: Path, mode: str) -> None:
    async with serving(tmp_path, mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) >= OWN | ADMIN
    assert {"toy__echo", "toy__fail", "toy__crash", "toy__sleep", "toy__add_tool"} <= set(listed)
    echo = listed["toy__echo"]
    assert echo.description == "Answer the text unchanged, and say which server answered."
    assert echo.input_schema["required"] == ["text"]  # the downstream's schema, unchanged
    assert listed["recommend_tool"].output_schema is not None  # ours declare what they answer


async def test_a_proxied_call_answers_what_the_downstream_answered_with_its_execution_id(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        result = await client.call_tool("toy__echo", {"text": "hello"})
    assert not result.is_error and text(result) == "hello"
    assert result.structured_content == {"server": "toy"}
    execution_id = execution_of(result)
    assert uuid.UUID(execution_id)
    recorded = rows(tmp_path, "SELECT id, tool, server, success, error_type, latency_ms FROM executions")
    assert len(recorded) == 1
    [(row_id, tool, server, success, error_type, latency_ms)] = recorded
    assert (row_id, tool, server, success, error_type) == (execution_id, "toy__echo", "toy", 1, None)
    assert latency_ms > 0


async def test_a_downstream_tool_error_passes_through_unchanged_and_is_recorded_as_a_failure(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        result = await client.call_tool("toy__fail", {"reason": "disk on fire"})
    assert result.is_error and text(result) == "failed: disk on fire"
    assert rows(tmp_path, "SELECT id, success, error_type FROM executions") == [(execution_of(result), 0, "ToolError")]


async def test_a_downstream_protocol_error_becomes_an_is_error_result_naming_server_and_tool(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        result = await client.call_tool("toy__crash", {})
        after = await client.call_tool("toy__echo", {"text": "still here"})
    assert result.is_error
    assert "'toy' refused the call to 'crash'" in text(result) and "crashed on purpose" in text(result)
    assert text(after) == "still here"
    assert rows(tmp_path, "SELECT tool, success, error_type FROM executions ORDER BY seq") == [
        ("toy__crash", 0, "DownstreamError"),
        ("toy__echo", 1, None),
    ]


async def test_arguments_against_the_tools_schema_are_refused_without_reaching_the_downstream(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        result = await client.call_tool("toy__echo", {"text": 5})
    assert result.is_error
    assert text(result).startswith("invalid arguments for toy__echo") and "not forwarded to 'toy'" in text(result)
    assert rows(tmp_path, "SELECT success, error_type FROM executions") == [(0, "InvalidArgumentsError")]


async def test_an_unknown_tool_is_a_protocol_error_and_is_not_recorded(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("toy__nothing", {})
    assert refused.value.code == INVALID_PARAMS and "Unknown tool: 'toy__nothing'" in str(refused.value)
    assert rows(tmp_path, "SELECT count(*) FROM executions") == [(0,)]


@pytest.mark.parametrize(("exposure", "where"), [("all", "see tools/list"), ("search", "search_tools finds them")])
async def test_a_misspelt_tool_name_is_answered_with_the_near_miss_and_where_the_tools_are_listed(
    tmp_path: Path, exposure: str, where: str
) -> None:
    async with serving(tmp_path, exposure=exposure) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("toy__ecoh", {})
        with pytest.raises(MCPError) as bare:  # the downstream's own name of a tool toolwise lists
            await client.call_tool("echo", {})
        with pytest.raises(MCPError) as shouted:  # a name in another case (a model's, a person's)
            await client.call_tool("TOY__ECHO", {})
        with pytest.raises(MCPError) as bare_shouted:
            await client.call_tool("Echo", {})
    assert str(bare.value).startswith("Unknown tool: 'echo' (did you mean 'toy__echo'? toolwise serves ")
    assert str(shouted.value).startswith("Unknown tool: 'TOY__ECHO' (did you mean 'toy__echo'? toolwise serves ")
    assert str(bare_shouted.value).startswith("Unknown tool: 'Echo' (did you mean 'toy__echo'? toolwise serves ")
    assert refused.value.code == INVALID_PARAMS
    assert str(refused.value).startswith("Unknown tool: 'toy__ecoh' (did you mean 'toy__echo'? toolwise serves ")
    assert str(refused.value).endswith(f" tools, {where})")


async def test_bad_arguments_to_our_own_tools_are_an_is_error_result_naming_the_field(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        empty = await client.call_tool("recommend_tool", {"query": ""})
        extra = await client.call_tool("recommend_tool", {"query": "echo", "colour": "red"})
    assert empty.is_error and text(empty).startswith("invalid arguments for recommend_tool") and "query" in text(empty)
    assert extra.is_error and text(extra) == (
        "invalid arguments for recommend_tool: colour: Extra inputs are not permitted; "
        "it takes query, top_k, candidates, session_id"
    )


async def test_a_misspelt_argument_of_our_own_tools_is_answered_with_the_one_meant(tmp_path: Path) -> None:
    """The hint came from the config file's keys: `policy` on recommend_tool was answered "did you mean
    'policy'?" (a setting), and `topk` no hint at all (tools/list leaves `additionalProperties` out)."""
    async with serving(tmp_path, exposure="search") as client:
        asked: dict[str, dict[str, Any]] = {
            "recommend_tool": {"query": "echo", "topk": 3},
            "submit_feedback": {"rating": 4, "execution": "e-1"},
            "end_session": {"outcome": "success", "session": "s"},
            "call_tool": {"nme": "toy__echo", "arguments": {"text": "x"}},
        }
        said = {tool: text(await client.call_tool(tool, args)) for tool, args in asked.items()}
        setting = text(await client.call_tool("recommend_tool", {"query": "echo", "policy": "ucb"}))
        inner = text(await client.call_tool("call_tool", {"name": "recommend_tool", "arguments": {"qeury": "x"}}))
    assert said == {
        "recommend_tool": "invalid arguments for recommend_tool: topk: Extra inputs are not permitted; "
        "did you mean 'top_k'?",
        "submit_feedback": "invalid arguments for submit_feedback: execution: Extra inputs are not permitted; "
        "did you mean 'execution_id'?",
        "end_session": "invalid arguments for end_session: session: Extra inputs are not permitted; "
        "did you mean 'session_id'?",
        "call_tool": "invalid arguments for call_tool: name: Field required; nme: Extra inputs are not permitted; "
        "did you mean 'name'?",
    }
    assert setting == (
        "invalid arguments for recommend_tool: policy: Extra inputs are not permitted; "
        "it takes query, top_k, candidates, session_id"
    )
    assert inner.startswith("invalid arguments for recommend_tool: query: Field required; qeury: Extra inputs")
    assert inner.endswith("; did you mean 'query'?")


async def test_an_execution_id_cut_mid_character_is_an_unknown_id_not_a_bug(tmp_path: Path) -> None:
    """Half a surrogate pair (a JavaScript client that cut a string) is no text a database takes: the look-up
    of the id raised UnicodeEncodeError, answered 'Error executing tool submit_feedback' with a traceback."""
    async with serving(tmp_path) as client:
        await client.call_tool("toy__echo", {"text": "rated"})
        cut = await client.call_tool("submit_feedback", {"rating": 3, "execution_id": "4f1c\ud83d"})
    assert cut.is_error and text(cut).startswith("submit_feedback: no call with execution_id '4f1c\ufffd'"), text(cut)


async def test_bad_arguments_through_call_tool_name_the_tool_called(tmp_path: Path) -> None:
    """As a downstream tool's do ('invalid arguments for toy__echo: …'): an own tool's bad arguments given
    through call_tool were said of call_tool ('invalid arguments for call_tool: query: Field required'),
    which takes no `query`: a model would add one to call_tool's own arguments."""
    async with serving(tmp_path, exposure="search") as client:
        missing = await client.call_tool("call_tool", {"name": "recommend_tool", "arguments": {}})
        unknown = await client.call_tool(
            "call_tool", {"name": "recommend_tool", "arguments": {"query": "x", "candidates": ["toy__nope"]}}
        )
        unnamed = await client.call_tool("call_tool", {"arguments": {}})
        stats = await client.call_tool("call_tool", {"name": "get_learning_stats", "arguments": None})
        echo = await client.call_tool("call_tool", {"name": "toy__echo", "arguments": None})
        nested = await client.call_tool(  # a model that wraps its call once too often
            "call_tool", {"name": "call_tool", "arguments": {"name": "toy__echo", "arguments": {"text": "x"}}}
        )
    assert missing.is_error and text(missing) == "invalid arguments for recommend_tool: query: Field required"
    assert unknown.is_error and text(unknown) == "recommend_tool: unknown tool(s): toy__nope"
    assert unnamed.is_error and text(unnamed) == "invalid arguments for call_tool: name: Field required"
    # `"arguments": null` (a model's way to say "none") was "arguments: Input should be a valid dictionary"
    assert not stats.is_error and text(echo) == (
        "invalid arguments for toy__echo: 'text' is a required property (not forwarded to 'toy')"
    )
    # was the protocol error "Unknown tool: 'call_tool' (… toolwise serves 16 tools …)", of a tool tools/list holds
    assert nested.is_error and text(nested) == (
        "call_tool: name the tool to call, not call_tool: call_tool(name='toy__echo', arguments={…})"
    )


async def test_what_the_caller_got_wrong_is_named_in_an_is_error_result(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        nothing = await client.call_tool("recommend_tool", {"query": "echo", "candidates": []})
        stranger = await client.call_tool("recommend_tool", {"query": "echo", "candidates": ["toy__nope"]})
        unended = await client.call_tool("end_session", {"session_id": "never-used", "outcome": "success"})
        yes = await client.call_tool("recommend_tool", {"query": "echo", "top_k": True})  # not a count
        nothing_next = await client.call_tool("recommend_next_tools", {"top_k": False})
    assert nothing.is_error and text(nothing) == (
        "recommend_tool: candidates is empty: name at least one tool, or leave it out for every listed tool"
    )
    assert yes.is_error and text(yes) == "invalid arguments for recommend_tool: top_k: a number, not true"
    assert nothing_next.is_error and text(nothing_next).endswith("top_k: a number, not false")
    assert stranger.is_error and text(stranger) == "recommend_tool: unknown tool(s): toy__nope"
    assert unended.is_error and text(unended) == (
        "end_session: session 'never-used' has no calls to end (a client ends only its own sessions)"
    )


async def test_a_session_ended_twice_is_told_it_ended_not_that_it_is_anothers(tmp_path: Path) -> None:
    """A second end_session of a session said "has no calls to end (a client ends only its own sessions)":
    as if the session were another client's, where the client had ended it itself."""
    async with serving(tmp_path) as client:
        ok(await client.call_tool("toy__echo", {"text": "x"}, meta=session_meta("conv-A")))
        ok(await client.call_tool("end_session", {"session_id": "conv-A", "outcome": "partial"}))
        again = await client.call_tool("end_session", {"session_id": "conv-A", "outcome": "success"})
        ok(await client.call_tool("toy__echo", {"text": "y"}, meta=session_meta("conv-A")))
        anew = await client.call_tool("end_session", {"session_id": "conv-A", "outcome": "success"})
    assert again.is_error and text(again).startswith("end_session: session 'conv-A' already ended (partial at ")
    assert text(again).endswith(" UTC); a call in it after that starts it anew"), text(again)
    assert not anew.is_error and anew.structured_content["tools"] == ["toy__echo"]  # the call after the end


@pytest.mark.parametrize("name", ["request-42", "team/request-2026-11-28"])
async def test_a_session_the_client_names_request_something_keeps_its_calls(tmp_path: Path, name: str) -> None:
    """A session named `request-42` was taken for toolwise's own id of a request on no connection (its
    `request-` prefix): each of its calls stood alone, recommend_next_tools saw none of them, and its end
    said it had no calls."""
    async with serving(tmp_path) as client:
        ok(await client.call_tool("recommend_tool", {"query": "echo this", "session_id": name}))
        for word in ("a", "b"):
            ok(await client.call_tool("toy__echo", {"text": word}, meta=session_meta(name)))
        following = ok(await client.call_tool("recommend_next_tools", {"session_id": name}))
        ended = ok(await client.call_tool("end_session", {"session_id": name, "outcome": "success"}))
    assert following["recent_tools"] == ["toy__echo", "toy__echo"]
    assert ended["session_id"] == name and ended["tools"] == ["toy__echo", "toy__echo"]


async def test_a_request_on_no_connection_is_told_to_name_its_session(tmp_path: Path) -> None:
    """Over 2026-07-28 (HTTP) a request comes on no connection: each is a session of its own. end_session
    and a rating with neither execution_id nor tool said "session 'request-…' has no calls to end (a client
    ends only its own sessions)" / "… or the tool of a call made in this session": a session the client
    never named, and advice that cannot work there."""
    async with serving(tmp_path, mode="auto") as client:
        ok(await client.call_tool("toy__echo", {"text": "x"}))
        ended = await client.call_tool("end_session", {"outcome": "success"})
        rated = await client.call_tool("submit_feedback", {"rating": 4})
    alone = "this request is a session of its own (it came on no connection, as an HTTP request of 2026-07-28 does)"
    assert ended.is_error and text(ended) == (
        f"end_session: {alone}, with no calls to end: pass the session_id your calls named "
        "(session_id, or _meta['toolwise/session_id'] on a call)"
    )
    assert rated.is_error and text(rated) == (
        f"submit_feedback: {alone}, with no call to rate: pass execution_id (from the call's "
        "_meta['toolwise/execution_id']), the tool called, or the session_id your calls named"
    )


async def test_a_bug_in_one_of_our_tools_is_logged_with_its_traceback_and_answered_generically(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(services: Services, args: Input, session: Session) -> Output:
        raise ValueError("internal detail 0x2a")  # a bug, not the caller's mistake

    async with running(tmp_path) as (app, client):
        app.own["get_successful_sequences"] = replace(app.own["get_successful_sequences"], handler=broken)
        with caplog.at_level(logging.ERROR, logger="toolwise.server.handlers"):
            failed = await client.call_tool("get_successful_sequences", {})
        after = await client.call_tool("toy__echo", {"text": "still served"})
    assert failed.is_error and text(failed) == "Error executing tool get_successful_sequences"
    [logged] = [r for r in caplog.records if r.name == "toolwise.server.handlers"]
    assert logged.exc_info is not None and "internal detail 0x2a" in str(logged.exc_info[1])
    assert text(after) == "still served"


async def test_a_call_slower_than_call_timeout_s_fails_naming_the_setting(tmp_path: Path) -> None:
    async with serving(tmp_path, call_timeout_s=2) as client:  # room for the echo on a loaded machine
        slow = await client.call_tool("toy__sleep", {"seconds": 30})
        assert slow.is_error and "did not answer within 2s (call_timeout_s)" in text(slow)
        assert text(await client.call_tool("toy__echo", {"text": "next"})) == "next"
    assert (tmp_path / "toy.log").read_text() == "sleep cancelled"  # the downstream was told to stop
    assert rows(tmp_path, "SELECT tool, success FROM executions ORDER BY seq") == [("toy__sleep", 0), ("toy__echo", 1)]


async def test_a_call_the_client_cancels_is_cancelled_downstream_and_toolwise_keeps_serving(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        with anyio.move_on_after(1):  # the client gives up on the call
            await client.call_tool("toy__sleep", {"seconds": 30})
        with anyio.fail_after(10):
            while not (tmp_path / "toy.log").exists():
                await anyio.sleep(0.05)
        assert (tmp_path / "toy.log").read_text() == "sleep cancelled"
        after = await client.call_tool("toy__echo", {"text": "after"})
        assert text(after) == "after"
        stats = ok(await client.call_tool("get_learning_stats", {}))
    assert stats["store"] == "ok"
    assert ("toy__echo", 1) in rows(tmp_path, "SELECT tool, success FROM executions")  # its recording works on


async def test_a_second_downstream_is_served_beside_the_first(tmp_path: Path) -> None:
    async with serving(tmp_path, in_process={"toy": toy_server.served(), "time": time_server()}) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        now = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
    assert {"toy__echo", "time__get_current_time", "time__convert_time"} <= names
    assert not now.is_error and '"timezone": "UTC"' in text(now)
    assert rows(tmp_path, "SELECT tool, server FROM executions") == [("time__get_current_time", "time")]


async def test_a_result_that_breaks_its_schema_fails_that_call_and_never_opens_the_circuit(tmp_path: Path) -> None:
    async with serving(tmp_path, circuit_failures=2) as client:
        for _ in range(4):
            bad = await client.call_tool("toy__malformed", {})
            assert bad.is_error and "with a result that breaks its schema" in text(bad), text(bad)
        echoed = await client.call_tool("toy__echo", {"text": "still served"})
    assert not echoed.is_error and text(echoed) == "still served"
    assert (
        rows(tmp_path, "SELECT tool, success, error_type FROM executions WHERE tool = 'toy__malformed'")
        == [("toy__malformed", 0, "InvalidResultError")] * 4
    )
