"""The downstream catalogue as a client sees it: each server's tools under its own prefix, collisions
resolved without taking our tools' names, a downstream's new tool listed and announced, a downstream
that cannot start reported while the others serve. In-process through `Client(server)`."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server, ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ToolsListChanged
from mcp_types.jsonrpc import INTERNAL_ERROR

from tests.server import toy_server
from tests.server.surface import HeldEmbedder, ok, rows, running, serving, text
from toolwise.config import InProcessServer
from toolwise.feedback.errors import DatabaseUnusableError
from toolwise.learning import core
from toolwise.learning.watermark import Covered


async def test_two_servers_with_the_same_tools_are_told_apart_by_prefix(tmp_path: Path) -> None:
    servers = {"left": toy_server.served("left"), "right": toy_server.served("right", prefix="r")}
    async with serving(tmp_path, in_process=servers) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        left = await client.call_tool("left__echo", {"text": "a"})
        right = await client.call_tool("r__echo", {"text": "b"})
    assert {"left__echo", "r__echo"} <= names and "right__echo" not in names
    assert left.structured_content == {"server": "left"} and right.structured_content == {"server": "right"}
    assert rows(tmp_path, "SELECT tool, server FROM executions ORDER BY seq") == [
        ("left__echo", "left"),
        ("r__echo", "right"),
    ]


async def test_a_bare_tool_named_like_one_of_ours_gets_a_suffix_and_ours_keeps_its_name(tmp_path: Path) -> None:
    async with serving(tmp_path, in_process={"toy": toy_server.served(prefix="")}) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        theirs = await client.call_tool("recommend_tool-2", {})
        ours = await client.call_tool("recommend_tool", {"query": "echo some text"})
    assert {"echo", "recommend_tool", "recommend_tool-2"} <= names
    assert text(theirs) == "the toy server's recommend_tool"
    assert ok(ours)["recommendations"]  # toolwise's own answered
    assert rows(tmp_path, "SELECT tool, server FROM executions") == [("recommend_tool-2", "toy")]


async def test_a_downstreams_new_tool_is_announced_listed_callable_and_recommendable(tmp_path: Path) -> None:
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)

    async with serving(tmp_path, mode="legacy", heard=on_message) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        await client.call_tool("toy__add_tool", {"name": "translate"})
        with anyio.fail_after(10):
            while not heard:
                await anyio.sleep(0.05)
        after = {t.name for t in (await client.list_tools()).tools}
        called = await client.call_tool("toy__translate", {})
        recommended = ok(
            await client.call_tool("recommend_tool", {"query": "translate", "candidates": ["toy__translate"]})
        )
    assert "toy__translate" not in before and "toy__translate" in after
    assert text(called) == "the toy server's translate"
    assert [r["tool"] for r in recommended["recommendations"]] == ["toy__translate"]


async def test_a_2026_era_client_listening_hears_a_downstreams_new_tool(tmp_path: Path) -> None:
    async with serving(tmp_path, mode="auto") as client, client.listen(tools_list_changed=True) as changes:
        await client.call_tool("toy__add_tool", {"name": "translate"})
        with anyio.fail_after(10):
            event = await anext(aiter(changes))
        assert isinstance(event, ToolsListChanged)
        assert "toy__translate" in {t.name for t in (await client.list_tools()).tools}


async def test_a_server_that_cannot_start_is_reported_and_the_others_serve(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = {"broken": {"command": str(tmp_path / "no-such-server")}}  # no process: the file does not exist
    caplog.set_level(logging.ERROR, logger="toolwise.downstream.catalogue")
    async with serving(tmp_path, broken, in_process={"toy": toy_server.served()}, start_wait_s=10) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        echoed = await client.call_tool("toy__echo", {"text": "fine"})
        stats = ok(await client.call_tool("get_learning_stats", {}))
    assert "toy__echo" in names and not any(n.startswith("broken__") for n in names)
    assert text(echoed) == "fine"
    health = {d["server"]: d for d in stats["downstreams"]}
    assert health["toy"]["state"] == "ready"
    assert health["broken"]["state"] == "failed" and "no-such-server" in health["broken"]["error"]
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("downstream broken did not start")]
    assert len(said) == 1 and said[0].endswith("`toolwise doctor` says what to fix)"), said


async def test_calls_are_answered_while_a_new_tools_document_is_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    embedder = HeldEmbedder("translate", events)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    async with serving(tmp_path) as client:
        known = ok(await client.call_tool("get_learning_stats", {}))["tools"]
        await client.call_tool("toy__add_tool", {"name": "translate"})
        with anyio.fail_after(10):
            while not embedder.embedding.is_set():
                await anyio.sleep(0.01)
        echoed = await client.call_tool("toy__echo", {"text": "still served"})
        stats = ok(await client.call_tool("get_learning_stats", {}))
        events.append("calls answered")
        embedder.release.set()
        with anyio.fail_after(10):
            while ok(await client.call_tool("get_learning_stats", {}))["tools"] == known:
                await anyio.sleep(0.05)
        recommended = ok(
            await client.call_tool("recommend_tool", {"query": "translate", "candidates": ["toy__translate"]})
        )
    assert events == ["calls answered", "new tool embedded"]  # the event loop never waited on the embedding
    assert text(echoed) == "still served" and stats["calls"] >= 1
    assert stats["tools"] == known  # meanwhile the learner kept the catalogue it knew, whole
    assert [r["tool"] for r in recommended["recommendations"]] == ["toy__translate"]


async def test_a_starting_server_answers_while_its_first_catalogue_is_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow embedder (MiniLM: most of a minute at 1,000 tools) does not hold the start: tools/list,
    calls and recommend_tool answer meanwhile, the tools ranked by BM25; the calls are learned once the
    documents are embedded."""
    events: list[str] = []
    embedder = HeldEmbedder("unchanged", events)  # in echo's description
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    async with serving(tmp_path, seed=None) as client:
        with anyio.fail_after(10):
            while not embedder.embedding.is_set():
                await anyio.sleep(0.01)
        names = {t.name for t in (await client.list_tools()).tools}
        echoed = await client.call_tool("toy__echo", {"text": "served"})
        recommended = ok(await client.call_tool("recommend_tool", {"query": "say which server answered the text"}))
        events.append("answered")
        embedder.release.set()
        stats = ok(await client.call_tool("get_learning_stats", {}))  # once the calls before it are learned
    assert events == ["answered", "new tool embedded"]  # the start never waited on the embedding
    assert "toy__echo" in names and text(echoed) == "served"
    assert recommended["recommendations"][0]["tool"] == "toy__echo"
    assert stats["calls"] == 1


def test_a_shutdown_while_the_first_catalogue_embeds_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server closed (stdin closed, SIGTERM, the HTTP shutdown) while its first catalogue is embedded
    (with MiniLM, long at a large catalogue) stops without waiting for the embedding, and the calls it answered
    meanwhile are recorded all the same. Run as the CLI runs a server: `asyncio.run` returns once the
    event loop and its worker threads are done with."""
    events: list[str] = []
    embedder = HeldEmbedder("unchanged", events)  # held until released (5 s at most)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)

    async def serve() -> None:
        async with serving(tmp_path, seed=None) as client:
            with anyio.fail_after(10):
                while not embedder.embedding.is_set():
                    await anyio.sleep(0.01)
            for said in ("one", "two"):
                assert text(await client.call_tool("toy__echo", {"text": said})) == said

    asyncio.run(serve())
    events.append("shut down")
    stopped = list(events)
    embedder.release.set()  # the abandoned embedding ends now
    assert stopped == ["shut down"]  # the shutdown did not wait for the embedding
    assert rows(tmp_path, "SELECT tool, success FROM executions ORDER BY seq") == [("toy__echo", 1)] * 2


class HeldLoad(HeldEmbedder):
    """An embedder whose model takes until `release` (5 s at most) to load, as MiniLM's or WordLlama's load
    takes seconds on a loaded machine."""

    def load(self) -> object:
        self.release.wait(timeout=5)
        self.events.append("model loaded")
        return super().load()


def test_a_start_whose_database_fails_ends_with_its_error_without_waiting_for_the_model_to_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database fails while the embedder's model loads: the start ends with the database's error at
    once, as the CLI runs it (`asyncio.run` returns once the event loop and its worker threads are done
    with), not once the model has loaded for nobody."""
    events: list[str] = []
    embedder = HeldLoad("unchanged", events)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    folder = tmp_path / "a-folder"
    folder.mkdir()

    async def start() -> None:
        async with serving(tmp_path, database_url=f"sqlite+aiosqlite:///{folder}"):
            pytest.fail("served on a database that cannot be opened")

    with pytest.raises(DatabaseUnusableError, match="unable to open database file"):
        asyncio.run(start())
    events.append("start failed")
    stopped = list(events)
    embedder.release.set()  # the abandoned load ends now
    assert stopped == ["start failed"]  # the failing start did not wait for the load


async def test_a_start_whose_database_fails_leaves_nothing_running_in_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started in a loop that goes on (an agent that embeds toolwise), a start whose database fails leaves
    none of its work behind: neither the model's load nor the embedding of the tools listed meanwhile."""
    embedder = HeldLoad("unchanged", [])
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    folder = tmp_path / "a-folder"
    folder.mkdir()
    before = asyncio.all_tasks()
    try:
        with pytest.raises(DatabaseUnusableError):
            async with serving(tmp_path, database_url=f"sqlite+aiosqlite:///{folder}"):
                pytest.fail("served on a database that cannot be opened")
        for _ in range(10):  # the tasks cancelled end within a few turns of the loop
            await asyncio.sleep(0)
        left = [task.get_name() for task in asyncio.all_tasks() - before if not task.done()]
    finally:
        embedder.release.set()
    assert left == []


async def test_calls_answered_while_a_first_run_embeds_are_learned_once_at_the_next_start_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first run stopped while its first catalogue is embedded leaves no learned state holding its calls
    learned with the documents' cosine missing (0): the next start learns them from the log, once, every
    document embedded (nothing learned twice or lost)."""
    events: list[str] = []
    embedder = HeldEmbedder("unchanged", events)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    async with serving(tmp_path, seed=None) as client:
        with anyio.fail_after(10):
            while not embedder.embedding.is_set():
                await anyio.sleep(0.01)
        for said in ("one", "two"):
            assert text(await client.call_tool("toy__echo", {"text": said})) == said
    embedder.release.set()  # the abandoned embedding ends; the next start embeds at once
    calls = rows(tmp_path, "SELECT id, seq FROM executions ORDER BY seq")
    stored = [Covered.of(json.loads(covered)) for (covered,) in rows(tmp_path, "SELECT covered FROM snapshots")]
    holding = [(i, seq) for i, seq in calls for c in stored if i in c.live or not c.executions.fresh(seq)]
    async with running(tmp_path, seed=None) as (app, _):
        with anyio.fail_after(10):
            await app.learning.until_loaded()
            while app.learning.catching_up:
                await anyio.sleep(0.01)
        learned, unembedded = app.learning.learner.updates, app.learning.learner.index.unembedded
    assert len(calls) == 2 and holding == []  # no snapshot counts them as learned
    assert learned == 2 and not unembedded  # learned once, at the restart, with the catalogue embedded


async def test_a_learned_state_loaded_while_the_first_catalogue_embeds_ends_with_every_document_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest snapshot loads (in a worker thread) beside the first catalogue's embedding: the state
    adopted lists the catalogue, and once both are done no document is left to BM25 alone."""
    async with running(tmp_path, seed=None) as (app, client):  # a state to load next time (the shutdown snapshot)
        for _ in range(3):
            await client.call_tool("toy__echo", {"text": "learned"})
        with anyio.fail_after(10):  # learned embedded: a stop before would store no snapshot of them
            await app.learning.until_loaded()
    events: list[str] = []
    embedder = HeldEmbedder("unchanged", events)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    async with running(tmp_path, seed=None) as (app, client):
        empty = app.learning.state
        with anyio.fail_after(10):
            while not embedder.embedding.is_set():
                await anyio.sleep(0.01)
        recommended = ok(await client.call_tool("recommend_tool", {"query": "say which server answered the text"}))
        events.append("answered")
        embedder.release.set()
        with anyio.fail_after(10):
            await app.learning.until_loaded()  # the snapshot loaded and the documents embedded
        stats = ok(await client.call_tool("get_learning_stats", {}))
        index = app.learning.learner.index
        listed = {index.documents[name] for name in index.active_names}
        adopted = app.learning.state is not empty
    assert events[0] == "answered" and recommended["recommendations"][0]["tool"] == "toy__echo"
    assert adopted and stats["updates"] == 3 and "toy__echo" in index.active_names
    assert not index.unembedded and listed <= set(index.vectors)


async def test_with_a_seed_the_start_waits_for_the_catalogue_so_that_decisions_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    embedder = HeldEmbedder("unchanged", events)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)

    def let_go() -> None:  # the embedding, once begun, is held until the server answers (at most 3 s)
        embedder.embedding.wait(timeout=10)
        for _ in range(30):
            if "answering" in events:
                break
            time.sleep(0.1)
        embedder.release.set()

    threading.Thread(target=let_go, daemon=True).start()
    async with running(tmp_path, seed=7) as (app, client):
        events.append("answering")
        recommended = ok(await client.call_tool("recommend_tool", {"query": "say which server answered the text"}))
        unembedded = app.learning.learner.index.unembedded
    assert events == ["new tool embedded", "answering"] and not unembedded
    assert recommended["recommendations"][0]["tool"] == "toy__echo"


def unsteady(failing: list[bool]) -> tuple[Server[Any], InMemorySubscriptionBus, list[types.Tool]]:
    """A 2026-era downstream whose tool list changes when the test says (its `tools`, then an event on `bus`),
    and whose tools/list fails while `failing` holds True (it is reloading)."""
    bus = InMemorySubscriptionBus()
    tools = [types.Tool(name="first", input_schema={"type": "object"})]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        if failing[0]:
            raise MCPError(INTERNAL_ERROR, "reloading its plugins")
        return types.ListToolsResult(tools=list(tools))

    server = Server("unsteady", on_list_tools=list_tools, on_subscriptions_listen=ListenHandler(bus))
    return server, bus, tools


async def test_a_tool_list_that_fails_once_after_a_change_does_not_stop_later_changes_being_heard(
    tmp_path: Path,
) -> None:
    failing = [False]
    server, bus, tools = unsteady(failing)
    async with serving(tmp_path, mode="auto", in_process={"u": InProcessServer(server)}) as client:
        failing[0] = True
        tools.append(types.Tool(name="second", input_schema={"type": "object"}))
        await bus.publish(ToolsListChanged())  # its tools/list fails: toolwise keeps what it had
        await anyio.sleep(0.5)
        failing[0] = False
        tools.append(types.Tool(name="third", input_schema={"type": "object"}))
        await bus.publish(ToolsListChanged())
        with anyio.fail_after(10):
            while "u__third" not in {t.name for t in (await client.list_tools()).tools}:
                await anyio.sleep(0.05)


async def test_a_2026_era_downstream_s_prompt_change_is_told_to_a_handshake_era_client_once(tmp_path: Path) -> None:
    """A 2026-07-28 downstream's list changes come on its listen stream, which the SDK also hands to the
    connection's message handler: relayed from both, each change reached a client twice (and was listed twice)."""
    bus = InMemorySubscriptionBus()

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="t", input_schema={"type": "object"})])

    async def list_prompts(ctx: ServerRequestContext[Any], params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[types.Prompt(name="p")])

    server = Server(
        "u", on_list_tools=list_tools, on_list_prompts=list_prompts, on_subscriptions_listen=ListenHandler(bus)
    )
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.PromptListChangedNotification):
            heard.append(message)

    downstream = {"u": InProcessServer(server)}
    async with serving(tmp_path, mode="legacy", heard=on_message, in_process=downstream) as client:
        await client.list_tools()  # the client is known: it hears of changes
        await bus.publish(PromptsListChanged())
        with anyio.fail_after(10):
            while not heard:
                await anyio.sleep(0.05)
        await anyio.sleep(1.0)  # a second copy would have come by now
    assert len(heard) == 1


async def test_a_start_cancelled_while_it_waits_for_a_downstream_leaves_nothing_running(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A start given up (a stop signal: `transports.ready_to_serve` cancels it) while it waits `start_wait_s` for a
    downstream that never answers: the downstream's process is killed and the database closed before the
    cancellation comes out, as for a start whose database fails. Before, the start's cleanup covered only the
    database's opening: toolwise's own exit (asyncio.run cancelling what was left) stopped the downstream through
    the SDK's stdin-close wait, 2 s after the signal, when a stdio client's SIGKILL comes."""
    hung = {"command": sys.executable, "args": ["-c", "import time; time.sleep(600)"]}
    before = asyncio.all_tasks()
    start = asyncio.ensure_future(serving(tmp_path, {"hung": hung}, start_wait_s=60, start_timeout_s=60).__aenter__())
    caplog.set_level(logging.INFO, "toolwise.feedback")
    with anyio.fail_after(10):
        while "feedback store ready" not in caplog.text:  # the database open: the start waits for the downstream
            await anyio.sleep(0.05)
    await anyio.sleep(0.2)
    start.cancel()
    with anyio.fail_after(1), pytest.raises(asyncio.CancelledError):
        await start
    for _ in range(10):  # the tasks cancelled end within a few turns of the loop
        await asyncio.sleep(0)
    left = [task.get_name() for task in asyncio.all_tasks() - before if not task.done()]
    assert left == []


async def test_a_tool_its_server_removed_is_said_to_be_removed_when_called_or_recommended(tmp_path: Path) -> None:
    """A downstream drops a tool while a client is connected: a call of it, or a recommendation among it, names
    the server that no longer lists it (it had been recommended, 'the agent picks it' 1.00, and a call of it
    was a bare "Unknown tool")."""
    server, bus, tools = unsteady([False])
    tools.append(types.Tool(name="second", description="Count the words of a text", input_schema={"type": "object"}))
    async with serving(tmp_path, mode="auto", in_process={"u": InProcessServer(server)}) as client:
        ok(await client.call_tool("recommend_tool", {"query": "first", "candidates": ["u__first"]}))
        del tools[0]
        await bus.publish(ToolsListChanged())
        with anyio.fail_after(10):
            while "u__first" in {t.name for t in (await client.list_tools()).tools}:
                await anyio.sleep(0.05)
        with pytest.raises(MCPError) as called:
            await client.call_tool("u__first", {})
        recommended = await client.call_tool("recommend_tool", {"query": "first", "candidates": ["u__first"]})
        still = ok(await client.call_tool("recommend_tool", {"query": "count words", "candidates": ["u__second"]}))
        after = ok(await client.call_tool("recommend_next_tools", {"recent_tools": ["u__first"]}))  # history
    assert "'u__first' (its server 'u' no longer lists it;" in str(called.value), called.value
    assert recommended.is_error and "u__first (its server 'u' no longer lists it)" in text(recommended), text(
        recommended
    )
    assert [r["tool"] for r in still["recommendations"]] == ["u__second"]
    assert after["recent_tools"] == ["u__first"]


async def test_a_call_of_a_tool_of_a_downstream_that_is_not_up_names_it_and_why(tmp_path: Path) -> None:
    """A downstream whose tools/list fails at start is restarted, its tools unlisted meanwhile: a call of one of
    them names that server and why it is down (it was "Unknown tool: 'u__first' (toolwise serves 9 tools, see
    tools/list)", as if the name were misspelt)."""
    server, _, _ = unsteady([True])
    async with serving(tmp_path, mode="auto", in_process={"u": InProcessServer(server)}) as client:
        with pytest.raises(MCPError) as called:
            await client.call_tool("u__first", {})
        with pytest.raises(MCPError) as stranger:
            await client.call_tool("v__first", {})
    said = str(called.value)
    assert said.startswith("Unknown tool: 'u__first' (its server 'u' is not up: "), said
    assert "reloading its plugins" in said and "try again shortly" in said, said
    assert "is not up" not in str(stranger.value)


async def test_a_downstream_whose_first_tool_list_fails_once_is_in_the_first_list_a_client_takes(
    tmp_path: Path,
) -> None:
    """A server answering its first tools/list with an error (reloading as it starts) is asked again on the same
    connection: its process was restarted for it, its tools missing from the first tools/list (which some clients
    never refresh) and a call of one of them unknown meanwhile."""
    failures = [1]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        if failures[0]:
            failures[0] -= 1
            raise MCPError(INTERNAL_ERROR, "still loading its plugins")
        return types.ListToolsResult(tools=[types.Tool(name="first", input_schema={"type": "object"})])

    server = Server("starting", on_list_tools=list_tools)
    async with running(tmp_path, mode="auto", in_process={"u": InProcessServer(server)}) as (app, client):
        names = {t.name for t in (await client.list_tools()).tools}
        [health] = app.catalogue.health()
    assert "u__first" in names
    assert (health.state, health.restarts) == ("ready", 0)


async def test_a_tool_keeps_its_public_name_when_a_tool_it_collided_with_is_removed(tmp_path: Path) -> None:
    """`files.read` and `files/read` are listed as u__files_read and u__files_read-2; once `files.read` is removed,
    u__files_read-2 still calls `files/read` and u__files_read is said removed (the names were assigned afresh:
    u__files_read called `files/read`, silently another tool than the client had been listed)."""
    bus = InMemorySubscriptionBus()
    tools = [types.Tool(name=n, input_schema={"type": "object"}) for n in ("files.read", "files/read")]

    async def list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(tools))

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=params.name)])

    server = Server("u", on_list_tools=list_tools, on_call_tool=call_tool, on_subscriptions_listen=ListenHandler(bus))
    async with serving(tmp_path, mode="auto", in_process={"u": InProcessServer(server)}) as client:
        before = {n: text(await client.call_tool(n, {})) for n in ("u__files_read", "u__files_read-2")}
        del tools[0]
        await bus.publish(ToolsListChanged())
        with anyio.fail_after(10):
            while "u__files_read" in (listed := {t.name for t in (await client.list_tools()).tools}):
                await anyio.sleep(0.05)
        after = text(await client.call_tool("u__files_read-2", {}))
        with pytest.raises(MCPError) as removed:
            await client.call_tool("u__files_read", {})
    assert before == {"u__files_read": "files.read", "u__files_read-2": "files/read"}
    assert "u__files_read-2" in listed and after == "files/read"
    assert "its server 'u' no longer lists it" in str(removed.value)
