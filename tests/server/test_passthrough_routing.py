"""Where a passed-through request goes when toolwise has not listed anything yet: a client that reads a
resource URI it knows (from an earlier run, from a previous connection, from its own config) without
listing first reaches the downstream that lists it, as a prompt asked for by name does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server, ServerRequestContext
from mcp.shared.exceptions import MCPError

from tests.server.surface import running
from toolwise.config import InProcessServer

WAIT_S = 10.0


def notes(name: str, uri: str, hung: asyncio.Event | None = None, *, tools: bool = True) -> Server[Any]:
    """A downstream with one resource, `uri`, whose text names the server, and one tool (none: `tools` False, a
    documents server); once `hung` is set, its tools/list never answers (a restart then never ends)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        if hung is not None and hung.is_set():
            await anyio.sleep_forever()
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})] if tools else [])

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


def prompter(name: str, answer_after_s: float = 0.0) -> Server[Any]:
    """A downstream with one prompt, `p`, whose text names the server (given after `answer_after_s`)."""

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="noop", input_schema={"type": "object"})])

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="p")])

    async def get_prompt(ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams) -> types.GetPromptResult:
        await asyncio.sleep(answer_after_s)
        text = types.TextContent(type="text", text=f"from {name}")
        return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])

    return Server(name, on_list_tools=list_tools, on_list_prompts=list_prompts, on_get_prompt=get_prompt)


@pytest.mark.parametrize(
    ("listed_first", "prefix", "name"),
    [(True, None, "b__p"), (False, None, "b__p"), (True, "", "p")],
    ids=["listed before", "never listed", "bare name listed before"],
)
async def test_a_prompt_of_a_restarting_downstream_waits_for_it_rather_than_being_unknown(
    tmp_path: Path, listed_first: bool, prefix: str | None, name: str
) -> None:
    """A prompt asked for while its downstream restarts (prompts/list meanwhile leaves it out) is answered once
    the downstream is back, within call_timeout_s, as a tool call is; it is not 'Unknown prompt'. So is one
    listed before under its bare name (prefix "")."""
    downstreams = {"a": InProcessServer(prompter("a")), "b": InProcessServer(prompter("b"), prefix=prefix)}
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=1.0) as (app, client):
        with anyio.fail_after(WAIT_S):
            if listed_first:
                assert {p.name for p in (await client.list_prompts()).prompts} == {"a__p", name}
            b = app.catalogue.downstreams["b"]
            assert b.client is not None
            b.broke(b.client)  # its connection found closed: reconnected after restart_backoff_s
            while b.state == "ready":
                await asyncio.sleep(0.01)
            assert {p.name for p in (await client.list_prompts()).prompts} == {"a__p"}  # b is down
            got = await client.get_prompt(name)
    assert [m.content.text for m in got.messages] == ["from b"]  # type: ignore[union-attr]


async def test_a_prompt_of_a_downstream_that_stays_down_says_so(tmp_path: Path) -> None:
    downstreams = {"a": InProcessServer(prompter("a")), "b": InProcessServer(prompter("b"))}
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=30.0, call_timeout_s=0.5) as (
        app,
        client,
    ):
        b = app.catalogue.downstreams["b"]
        assert b.client is not None
        b.broke(b.client)
        with anyio.fail_after(WAIT_S), pytest.raises(MCPError, match=r"'b' was not ready within 0\.5s"):
            await client.get_prompt("b__p")


async def test_a_prompt_request_that_finds_the_connection_closed_has_the_downstream_reconnected(
    tmp_path: Path,
) -> None:
    """A pass-through request that finds its downstream's connection closed says so by name and has the
    connection made anew, as a tool call does: the next request is answered (before, each went on failing over
    the dead connection until something else noticed)."""
    downstreams = {"b": InProcessServer(prompter("b"))}
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=0.05) as (app, client):
        b = app.catalogue.downstreams["b"]
        dead = b.connection(handshake=True)  # the one this (handshake-era) caller is served on
        assert dead is not None

        async def closed(*args: Any, **kwargs: Any) -> Any:
            raise anyio.ClosedResourceError

        dead.get_prompt = closed  # type: ignore[method-assign]  # a handshake-era caller's way
        dead.session.get_prompt = closed  # type: ignore[method-assign]  # a 2026-era caller's
        with anyio.fail_after(WAIT_S):
            with pytest.raises(MCPError, match="'b' closed the connection"):
                await client.get_prompt("b__p")
            got = await client.get_prompt("b__p")
    assert [m.content.text for m in got.messages] == ["from b"]  # type: ignore[union-attr]


async def test_a_resource_of_a_restarting_downstream_is_read_from_it_once_it_is_back(tmp_path: Path) -> None:
    """resources/list made while a downstream restarts leaves its resources out; a read of one of them then
    waits for that downstream (within call_timeout_s) rather than going to another or being 'not found'."""
    downstreams = {
        "a": InProcessServer(notes("a", "notes://a/today")),
        "b": InProcessServer(notes("b", "notes://b/today")),
    }
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=1.0) as (app, client):
        with anyio.fail_after(WAIT_S):
            assert {r.uri for r in (await client.list_resources()).resources} == {"notes://a/today", "notes://b/today"}
            b = app.catalogue.downstreams["b"]
            assert b.client is not None
            b.broke(b.client)
            while b.state == "ready":
                await asyncio.sleep(0.01)
            assert {r.uri for r in (await client.list_resources()).resources} == {"notes://a/today"}
            read = await client.read_resource("notes://b/today")
    assert [c.text for c in read.contents] == ["from b"]  # type: ignore[union-attr]


async def test_a_prompt_waited_for_through_a_restart_is_bounded_by_one_call_timeout(tmp_path: Path) -> None:
    """The wait for a restarting downstream, the listing after it and the request itself share the request's one
    call_timeout_s: a prompt whose downstream is back after 0.6 s and answers in 0.8 s is past a 1 s bound (before,
    each step had a bound of its own and it was answered at about 1.4 s, up to three bounds in all)."""
    downstreams = {"a": InProcessServer(prompter("a")), "b": InProcessServer(prompter("b", answer_after_s=0.8))}
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=0.6, call_timeout_s=1.0) as (
        app,
        client,
    ):
        b = app.catalogue.downstreams["b"]
        assert b.client is not None
        b.broke(b.client)  # never listed in this run: looked for once b is back
        with anyio.fail_after(WAIT_S), pytest.raises(MCPError, match=r"1s \(call_timeout_s"):
            await client.get_prompt("b__p")


async def test_a_never_listed_resource_of_a_restarting_downstream_is_not_sent_to_the_other(tmp_path: Path) -> None:
    """A URI no listing of this run named, read while its downstream restarts, with one other downstream offering
    resources: it waits for the restarting one (which may hold it, as it offered resources) and is read there.
    Before, the other one, then the only downstream with resources up, was sent every such URI."""
    downstreams = {
        "a": InProcessServer(notes("a", "notes://a/today")),
        "b": InProcessServer(notes("b", "notes://b/today")),
    }
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=0.5) as (app, client):
        b = app.catalogue.downstreams["b"]
        assert b.client is not None
        b.broke(b.client)  # nothing listed in this run: its URI is known to no route
        while b.state == "ready":
            await asyncio.sleep(0.01)
        with anyio.fail_after(WAIT_S):
            read = await client.read_resource("notes://b/today")
    assert [c.text for c in read.contents] == ["from b"]  # type: ignore[union-attr]


@pytest.mark.parametrize("others", [1, 0, 2], ids=["one other", "alone", "two others"])
async def test_a_resource_of_a_downstream_that_stays_down_names_it(tmp_path: Path, others: int) -> None:
    """A URI the ready downstreams neither list nor match, while another that offered resources stays down: the
    answer names that downstream and the bound, not 'not found' on the strength of the ready ones alone."""
    downstreams = {name: InProcessServer(notes(name, f"notes://{name}/today")) for name in ["a", "c"][:others]}
    downstreams["b"] = InProcessServer(notes("b", "notes://b/today"))
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=30.0, call_timeout_s=0.5) as (
        app,
        client,
    ):
        b = app.catalogue.downstreams["b"]
        assert b.client is not None
        b.broke(b.client)
        with anyio.fail_after(WAIT_S), pytest.raises(MCPError, match=r"'b'.*not ready within 0\.5s"):
            await client.read_resource("notes://b/today")
        if others:
            with anyio.fail_after(WAIT_S):  # a's own are read at once meanwhile
                read = await client.read_resource("notes://a/today")
            assert [c.text for c in read.contents] == ["from a"]  # type: ignore[union-attr]


async def test_a_resource_of_a_downstream_back_is_read_while_another_stays_down(tmp_path: Path) -> None:
    """A never-listed URI waited for while two downstreams that offered resources restart: the one holding it is
    read as soon as it is back, whichever other stays down. Before, the read waited for both to be back and, one
    hung in its restart, was refused after call_timeout_s naming the one down, though the one back held it."""
    hung = asyncio.Event()
    downstreams = {
        "a": InProcessServer(notes("a", "notes://a/today")),
        "b": InProcessServer(notes("b", "notes://b/today")),
        "c": InProcessServer(notes("c", "notes://c/today", hung)),
    }
    async with running(
        tmp_path, {}, in_process=downstreams, restart_backoff_s=0.2, call_timeout_s=3.0, start_timeout_s=30.0
    ) as (app, client):
        b, c = app.catalogue.downstreams["b"], app.catalogue.downstreams["c"]
        assert b.client is not None and c.client is not None
        hung.set()
        c.broke(c.client)
        b.broke(b.client)
        while b.state == "ready" or c.state == "ready":
            await asyncio.sleep(0.01)
        with anyio.fail_after(WAIT_S):
            read = await client.read_resource("notes://b/today")
        assert c.coming_back  # still down
    assert [part.text for part in read.contents] == ["from b"]  # type: ignore[union-attr]


async def test_a_resource_of_a_restarting_downstream_with_no_tools_is_read_from_it(tmp_path: Path) -> None:
    """A downstream that offers resources and no tools, read while it restarts: waited for as one with tools is,
    not taken for failed and its URI sent to the other downstream with resources."""
    downstreams = {
        "a": InProcessServer(notes("a", "notes://a/today")),
        "b": InProcessServer(notes("b", "notes://b/today", tools=False)),
    }
    async with running(tmp_path, {}, in_process=downstreams, restart_backoff_s=0.5) as (app, client):
        b = app.catalogue.downstreams["b"]
        assert b.client is not None
        b.broke(b.client)
        while b.state == "ready":
            await asyncio.sleep(0.01)
        with anyio.fail_after(WAIT_S):
            read = await client.read_resource("notes://b/today")
    assert [part.text for part in read.contents] == ["from b"]  # type: ignore[union-attr]
