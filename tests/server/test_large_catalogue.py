"""A catalogue of thousands of tools through the MCP surface (in-process `Client(server)`, the toy
downstream with 2,000 more tools): tools/list holds every tool exactly once, list after list, and
the pinned tools follow the catalogue's changes."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types

from tests.server import toy_server
from tests.server.surface import ok, serving

BULK = 2000
TOY = {"echo", "fail", "crash", "sleep", "add_tool", "malformed", "recommend_tool"}


async def test_tools_list_of_a_2000_tool_catalogue_holds_every_tool_once(tmp_path: Path) -> None:
    async with serving(tmp_path, in_process={"toy": toy_server.served(bulk=BULK)}) as client:
        first = [t.name for t in (await client.list_tools()).tools]
        again = [t.name for t in (await client.list_tools(cache_mode="refresh")).tools]
        own = {t for t in first if "__" not in t}
    assert max(Counter(first).values()) == 1 and len(first) == len(own) + len(TOY) + BULK
    assert {f"toy__bulk_{i:04d}" for i in range(BULK)} | {f"toy__{t}" for t in TOY} == set(first) - own
    assert "recommend_tool" in own and again == first


async def test_learned_exposure_lists_the_pinned_and_the_learned_tools_of_a_large_catalogue_once(
    tmp_path: Path,
) -> None:
    settings: dict[str, Any] = {
        "exposure": "learned",
        "exposure_k": 3,
        "exposure_interval_s": 0,
        "pinned_tools": ["toy__bulk_1*"],
    }
    async with serving(tmp_path, in_process={"toy": toy_server.served(bulk=BULK)}, **settings) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        found = ok(await client.call_tool("search_tools", {"query": "bulk tool number 42", "top_k": 5}))
        after = [t.name for t in (await client.list_tools(cache_mode="refresh")).tools]
    pinned = {f"toy__bulk_{i:04d}" for i in range(1000, 2000)}
    assert max(Counter(before).values()) == 1 and pinned <= set(before)
    assert not {n for n in before if n.startswith("toy__")} - pinned  # nothing else of the catalogue yet
    learned = [n for n in after if n not in before]
    assert max(Counter(after).values()) == 1 and len(learned) == 3  # exposure_k, each once
    assert set(learned) <= {t["name"] for t in found["tools"]} and not set(learned) & pinned


async def test_a_pinned_tool_a_downstream_adds_later_is_listed_once(tmp_path: Path) -> None:
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            heard.append(message)

    settings: dict[str, Any] = {"exposure": "search", "pinned_tools": ["toy__late_*"]}
    async with serving(tmp_path, mode="legacy", heard=on_message, **settings) as client:
        before = [t.name for t in (await client.list_tools()).tools]
        await client.call_tool("toy__add_tool", {"name": "late_one"})
        with anyio.fail_after(10):
            while not heard:
                await anyio.sleep(0.05)
        after = [t.name for t in (await client.list_tools(cache_mode="refresh")).tools]
    assert "toy__late_one" not in before and after.count("toy__late_one") == 1


def kept_loaded(tools: list[types.Tool]) -> set[str]:
    """The tools a client with a tool search of its own (Claude Code, …) keeps loaded."""
    return {t.name for t in tools if (t.meta or {}).get("anthropic/alwaysLoad") is True}


async def test_the_tools_toolwise_knows_matter_stay_loaded_in_a_client_with_its_own_tool_search(
    tmp_path: Path,
) -> None:
    """`_meta["anthropic/alwaysLoad"]` on recommend_tool and the pinned tools in `all`; in `learned` on
    the way to the rest, the pinned and the client's learned tools; nothing else, so a client's own
    search still hides the other tools of a large catalogue."""
    pinned: dict[str, Any] = {"pinned_tools": ["toy__echo", "get_tool_metrics"]}
    async with serving(tmp_path / "all", in_process={"toy": toy_server.served(bulk=50)}, **pinned) as client:
        every = (await client.list_tools()).tools
    assert kept_loaded(every) == {"recommend_tool", "toy__echo", "get_tool_metrics"} and len(every) > 60
    learned: dict[str, Any] = {"exposure": "learned", "exposure_k": 2, "exposure_interval_s": 0, **pinned}
    async with serving(tmp_path / "learned", in_process={"toy": toy_server.served(bulk=50)}, **learned) as client:
        found = ok(await client.call_tool("search_tools", {"query": "bulk tool number 42", "top_k": 5}))
        listed = (await client.list_tools(cache_mode="refresh")).tools
    shown = {t.name for t in listed} - {"search_tools", "call_tool", "toy__echo", "get_tool_metrics"}
    assert len(shown) == 2 and shown <= {t["name"] for t in found["tools"]}
    assert kept_loaded(listed) == {t.name for t in listed}


async def test_a_downstream_that_starts_late_leaves_the_tools_that_matter_marked_to_stay_loaded(
    tmp_path: Path,
) -> None:
    """A downstream still starting when toolwise serves (`start_wait_s`): the first tools/list waits for
    it and holds its tools, recommend_tool and the pinned ones still marked `anthropic/alwaysLoad`
    (Claude Code's tool search would hide them otherwise)."""
    toy = toy_server.spec()
    late = (
        f"import runpy, sys, time; time.sleep(1.5); sys.argv = [{toy['args'][0]!r}]; "
        "runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    slow = {"slow": {**toy, "args": ["-c", late]}}
    async with serving(tmp_path, slow, start_wait_s=0.1, pinned_tools=["slow__echo"]) as client:
        tools = (await client.list_tools()).tools
    assert "slow__echo" in {t.name for t in tools}
    assert kept_loaded(tools) == {"recommend_tool", "slow__echo"}
