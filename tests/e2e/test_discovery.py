"""Large catalogues: tools/list per `exposure`, `search_tools` and `call_tool` through the MCP surface
(in-process `Client(server)` in both protocol eras), real downstreams, a real SQLite file."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from tests.e2e.conftest import time_server, toolwise
from tests.server.surface import as_model_reads, execution_of, llama2_tokens, text
from toolwise.config import AppConfig, Settings
from toolwise.rl import Decision, Ranked
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server
from toolwise.server.exposure import Exposure

NOW = "time__get_current_time"
CONVERT = "time__convert_time"
CONVERT_ARGS = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
PICKY = {"command": sys.executable, "args": [str(Path(__file__).with_name("picky_server.py"))]}
OWN = {"recommend_tool", "recommend_next_tools", "submit_feedback", "end_session"}
# tools/list of FastMCP 4.2.3's BM25SearchTransform (search_tools + call_tool) in Llama 2 tokens, as
# bench/discovery.py measures it next to toolwise's (it needs `fastmcp`, which tests do not install).
PEER_LIST_TOKENS = 225


@asynccontextmanager
async def serving(db: Path, servers: dict[str, Any] | None = None, **settings: Any) -> AsyncIterator[Toolwise]:
    config = AppConfig.model_validate(
        {
            "mcpServers": servers or {"time": time_server()},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{db}", "seed": 7, "snapshot_interval_s": 0, **settings},
        }
    )
    async with Toolwise(config) as app:
        yield app


def executions(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT tool, session_id, decision_id, query, error_type FROM executions ORDER BY seq"
        ).fetchall()


@pytest.mark.parametrize("exposure", ["all", "search", "learned"])
async def test_tools_list_per_exposure_in_both_eras(tmp_path: Path, exposure: str) -> None:
    pinned = ["time__convert_*", "submit_*"]  # a glob pins toolwise's own tools as well as a downstream's
    async with serving(tmp_path / "t.db", exposure=exposure, pinned_tools=pinned) as app:
        server = build_server(app)
        for era in ("auto", "legacy"):
            async with Client(server, mode=era) as client:
                names = {t.name for t in (await client.list_tools()).tools}
            if exposure == "all":
                assert names >= OWN and {NOW, CONVERT} <= names, era
                assert not {"search_tools", "call_tool"} & names, era
            else:  # a fresh client has no learned tools yet: the way to the rest and the pinned ones only
                assert names == {"search_tools", "call_tool", CONVERT, "submit_feedback"}, era


async def test_search_exposure_lists_compact_definitions_an_agent_can_still_use(tmp_path: Path) -> None:
    """search_tools and call_tool are listed without titles, null unions or bounds (every turn pays for
    the list), yet say what a call needs; the bounds are still enforced, the error naming them."""
    async with serving(tmp_path / "t.db", exposure="search") as app, Client(build_server(app)) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        too_many = await client.call_tool("search_tools", {"query": "what time is it", "top_k": 500})
    assert set(listed) == {"search_tools", "call_tool"}
    search = listed["search_tools"].input_schema
    assert search["required"] == ["query"] and set(search["properties"]) == {"query", "top_k", "format", "session_id"}
    assert search["properties"]["format"] == {"default": "json", "description": "markdown: fewer tokens",
                                              "enum": ["json", "markdown"]}  # fmt: skip
    assert listed["call_tool"].input_schema == {
        "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
        "required": ["name"],
        "type": "object",
    }
    assert llama2_tokens(as_model_reads(list(listed.values()))) <= PEER_LIST_TOKENS
    assert too_many.is_error and "less than or equal to 50" in text(too_many)


async def test_search_finds_toolwises_own_tools_by_name_and_they_are_called_through_call_tool(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.db"
    async with serving(db, exposure="search") as app, Client(build_server(app)) as client:
        await client.call_tool(NOW, {"timezone": "UTC"})
        by_name = await client.call_tool("search_tools", {"query": "submit_feedback", "top_k": 3})
        in_words = await client.call_tool("search_tools", {"query": "end the session", "top_k": 3})
        rating = {"rating": 5, "tool": NOW}
        rated = await client.call_tool("call_tool", {"name": "submit_feedback", "arguments": rating})
    found = by_name.structured_content["tools"]
    assert found[0]["name"] == "submit_feedback" and "rating" in found[0]["input_schema"]["properties"]
    assert len(found) == 3  # the query's own tool, then the catalogue's best
    assert in_words.structured_content["tools"][0]["name"] == "end_session"
    assert not rated.is_error and rated.structured_content["rating"] == 5


async def test_a_hidden_tool_is_called_through_call_tool_and_directly(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with serving(db, exposure="search") as app, Client(build_server(app)) as client:
        assert NOW not in {t.name for t in (await client.list_tools()).tools}
        through = await client.call_tool("call_tool", {"name": NOW, "arguments": {"timezone": "Asia/Tokyo"}})
        direct = await client.call_tool(NOW, {"timezone": "Asia/Tokyo"})
        assert not through.is_error and not direct.is_error, (through.content, direct.content)
        assert "Asia/Tokyo" in text(through)
        assert execution_of(through) != execution_of(direct)
    assert [row[0] for row in executions(db)] == [NOW, NOW]  # both recorded as calls of the tool itself


async def test_call_tool_refuses_schema_invalid_arguments_before_the_downstream_sees_them(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with serving(db, {"picky": PICKY}, exposure="search") as app, Client(build_server(app)) as client:
        wrong = await client.call_tool("call_tool", {"name": "picky__strict", "arguments": {"n": "three"}})
        missing = await client.call_tool("call_tool", {"name": "picky__strict"})
        seen = await client.call_tool("call_tool", {"name": "picky__seen"})
        nameless = await client.call_tool("call_tool", {"arguments": {}})
    assert wrong.is_error and "argument 'n': 'three' is not of type 'integer'" in text(wrong)
    assert missing.is_error and "'n' is a required property" in text(missing)
    assert text(seen) == "0"  # neither reached the downstream
    assert nameless.is_error and "name" in text(nameless)
    assert [(r[0], r[4]) for r in executions(db)] == [
        ("picky__strict", "InvalidArgumentsError"),
        ("picky__strict", "InvalidArgumentsError"),
        ("picky__seen", None),
    ]


async def test_learned_exposure_lists_what_the_search_found_and_says_so(tmp_path: Path) -> None:
    heard = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.set()

    settings: dict[str, Any] = {"exposure": "learned", "exposure_k": 1, "exposure_interval_s": 0}
    async with serving(tmp_path / "t.db", **settings) as app:
        async with Client(build_server(app), mode="legacy", message_handler=on_message) as client:
            before = {t.name for t in (await client.list_tools()).tools}
            found = await client.call_tool("search_tools", {"query": "convert a time between timezones", "top_k": 2})
            assert not found.is_error, found.content
            top = found.structured_content["tools"][0]["name"]
            async with asyncio.timeout(10):
                await heard.wait()
            after = {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}
            assert not {NOW, CONVERT} & before
            assert after - before == {top}  # K = 1: the search's first pick
            heard.clear()
            again = await client.call_tool("search_tools", {"query": "convert a time between timezones", "top_k": 2})
            assert again.structured_content["tools"][0]["name"] == top
            await client.call_tool("get_learning_stats", {})  # a round trip: a notification would be here by now
            assert not heard.is_set()  # same set: nothing to announce
        async with Client(build_server(app), mode="legacy") as other:  # learned per client
            assert top not in {t.name for t in (await other.list_tools()).tools}


def test_learned_set_changes_at_most_once_per_interval() -> None:
    exposure = Exposure(Settings(exposure="learned", exposure_k=2, exposure_interval_s=10), catalogue=None)  # type: ignore[arg-type]

    def decision(*tools: str) -> Decision:
        return Decision("d", "semantic", "h", tools[0], [Ranked(t, 1.0, 0.5, 0.5) for t in tools], False, 1.0)

    assert exposure.note("c", decision("a", "b"), now=0.0)
    assert not exposure.note("c", decision("c", "d"), now=5.0)  # rate-limited
    assert exposure.note("c", decision("c", "d"), now=11.0)
    assert exposure._clients["c"].shown == ("c", "a")  # each recent request's first pick, newest first
    assert not exposure.note(None, decision("a"), now=100.0)  # no connection: no learned set


async def test_a_search_then_call_tool_is_learned_as_that_searchs_decision(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    async with serving(db, exposure="search") as app:
        updates = app.learning.learner.updates
        async with Client(build_server(app), mode="legacy") as client:
            query = "what time is it in Tokyo right now"
            found = await client.call_tool(
                "search_tools", {"query": query, "session_id": "conv-1", "format": "markdown"}
            )
            assert not found.is_error, found.content
            assert f"## {NOW} (relevance" in text(found)
            assert "\n- timezone: string, required — " in text(found)
            decision_id = found.structured_content["decision_id"]
            called = await client.call_tool("call_tool", {"name": NOW, "arguments": {"timezone": "Asia/Tokyo"}})
            assert not called.is_error
            ended = await client.call_tool("end_session", {"session_id": "conv-1", "outcome": "success"})
            assert ended.structured_content["tools"] == [NOW]
        assert app.learning.learner.updates > updates  # the learner took the outcome in
    # The log keeps a named session scoped to its client (its connection: `conn-…/conv-1`).
    named = [(tool, session.partition("/")[2], *rest) for tool, session, *rest in executions(db)]
    assert named == [(NOW, "conv-1", decision_id, query, None)]


async def test_learned_exposure_tells_a_2026_client_through_listen(write_config: Callable[..., Path]) -> None:
    config = write_config({"time": time_server()}, exposure="learned", exposure_k=1, exposure_interval_s=0)
    async with toolwise(config) as client:
        assert client.protocol_version.startswith("2026")
        assert NOW not in {t.name for t in (await client.list_tools()).tools}
        async with client.listen(tools_list_changed=True) as subscription:
            found = await client.call_tool("search_tools", {"query": "what time is it now in Tokyo", "top_k": 1})
            top = found.structured_content["tools"][0]["name"]
            async with asyncio.timeout(10):
                await anext(aiter(subscription))
        assert top in {t.name for t in (await client.list_tools(cache_mode="refresh")).tools}


async def test_a_search_for_a_tools_name_finds_it_first(tmp_path: Path) -> None:
    """An agent that read a tool's name (in a log, a previous answer) searches for it by that name."""
    servers = {"time": time_server(), "git": {"command": "mcp-server-git"}}
    # both downstreams up before the first search (start_wait_s): the index is then the whole catalogue's
    async with (
        serving(tmp_path / "t.db", servers, exposure="search", start_wait_s=60) as app,
        Client(build_server(app)) as client,
    ):
        listed = [t.name for t in app.catalogue.tools()]
        assert len(listed) > 10
        for name in listed:
            bare = name.partition("__")[2]
            for query in (name, bare, bare.replace("_", " ").upper()):
                found = await client.call_tool("search_tools", {"query": query, "top_k": 5})
                assert found.structured_content["tools"][0]["name"] == name, query


async def test_learning_promotes_the_tool_called_right_after_a_search(tmp_path: Path) -> None:
    query = "what time is it in Tokyo right now"
    # the handshake era: the calls have a connection to be attributed to the search on
    async with serving(tmp_path / "t.db", exposure="search") as app, Client(build_server(app), mode="legacy") as client:

        async def first_pick() -> str:
            found = await client.call_tool("search_tools", {"query": query, "session_id": "look"})
            await client.call_tool("end_session", {"session_id": "look"})
            return str(found.structured_content["tools"][0]["name"])

        first = await first_pick()
        second = CONVERT if first == NOW else NOW
        works = {NOW: {"timezone": "Asia/Tokyo"}, CONVERT: CONVERT_ARGS}
        nowhere = "Nowhere/Atlantis"
        fails = {NOW: {"timezone": nowhere}, CONVERT: {**CONVERT_ARGS, "source_timezone": nowhere}}
        for round_ in range(3):  # the first pick fails for this request; the second one does the job
            for tool, arguments in ((first, fails[first]), (second, works[second])):
                session = f"conv-{tool}-{round_}"
                await client.call_tool("search_tools", {"query": query, "session_id": session})
                called = await client.call_tool("call_tool", {"name": tool, "arguments": arguments})
                assert called.is_error == (tool == first), called.content
                await client.call_tool("end_session", {"session_id": session})
            await app.learning.drain()
        assert await first_pick() == second


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_real_client_session_keeps_recommend_tool_and_the_pinned_tools_loaded(
    write_config: Callable[..., Path], mode: str
) -> None:
    """`toolwise serve` as a client starts it (stdio, both eras): in its tools/list recommend_tool and
    the pinned tool carry `_meta["anthropic/alwaysLoad"]`, the other downstream tools do not."""
    config = write_config(pinned_tools=[CONVERT])
    async with toolwise(config, mode) as client:
        listed = (await client.list_tools()).tools
    marked = {t.name for t in listed if (t.meta or {}).get("anthropic/alwaysLoad") is True}
    assert marked == {"recommend_tool", CONVERT} and {NOW, "git__git_status"} <= {t.name for t in listed}


async def test_the_readmes_token_figures_are_what_a_client_of_its_example_reads(
    write_config: Callable[..., Path],
) -> None:
    """README.md says what tools/list costs on its example's servers with `exposure: search` "against"
    `all`: a new user counting them found 205 and 2,762 (toolwise's own tools 796), the README 205 and
    1,693 (a figure of another catalogue)."""
    counted = {}
    for exposure in ("search", "all"):
        async with toolwise(write_config(exposure=exposure)) as client:
            counted[exposure] = llama2_tokens(as_model_reads((await client.list_tools()).tools))
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    said = re.search(r"about ([\d,]+) tokens of definitions, against ([\d,]+) for", readme)
    assert said is not None, "the README's sentence on exposure: search's tokens"
    search, full = (int(figure.replace(",", "")) for figure in said.groups())
    assert search == pytest.approx(counted["search"], rel=0.05) and full == pytest.approx(counted["all"], rel=0.05), (
        f"the README says {search} and {full}, a client reads {counted['search']} and {counted['all']}"
    )
