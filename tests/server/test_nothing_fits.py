"""recommend_tool and search_tools say when no tool seems to fit a request (rl/fit.py), with the best guess
first and the ranking still given; a request a tool serves gets no such line. In-process, in front of the
reference mcp-server-time (get_current_time, convert_time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.server.surface import ok, serving, text, time_server

UNRELATED = "write a haiku about autumn leaves"
RELATED = "what time is it in Tokyo right now"
SAYS = "No tool seems to fit this request; best guess: "


def servers() -> dict[str, Any]:
    return {"in_process": {"time": time_server()}}


async def test_recommend_tool_says_nothing_fits_an_unrelated_request_and_not_a_related_one(tmp_path: Path) -> None:
    async with serving(tmp_path, **servers()) as client:
        unrelated = await client.call_tool("recommend_tool", {"query": UNRELATED, "top_k": 2})
        related = await client.call_tool("recommend_tool", {"query": RELATED, "top_k": 2})
    answer = ok(unrelated)
    assert answer["nothing_fits"] and len(answer["recommendations"]) == 2
    assert text(unrelated).splitlines()[0] == SAYS + answer["recommendations"][0]["tool"] + "."
    assert not ok(related)["nothing_fits"]
    assert not text(related).startswith("No tool")


async def test_search_tools_says_nothing_fits_in_either_format(tmp_path: Path) -> None:
    async with serving(tmp_path, **servers(), exposure="search") as client:
        found = {
            f: await client.call_tool("search_tools", {"query": UNRELATED, "format": f}) for f in ("json", "markdown")
        }
        related = await client.call_tool("search_tools", {"query": RELATED})
    for result in found.values():
        answer = ok(result)
        assert answer["nothing_fits"] and answer["tools"]
        assert text(result).splitlines()[0] == SAYS + answer["tools"][0]["name"] + "."
    assert not ok(related)["nothing_fits"]


async def test_switched_off_nothing_is_said(tmp_path: Path) -> None:
    async with serving(tmp_path, **servers(), nothing_fits=False) as client:
        result = await client.call_tool("recommend_tool", {"query": UNRELATED})
    assert not ok(result)["nothing_fits"] and not text(result).startswith("No tool")


UNSERVED = "set an alarm for 7am tomorrow in Tokyo time"  # near the time tools, served by neither
NOW, CONVERT = "time__get_current_time", "time__convert_time"


async def tries(client: Any, query: str, calls: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """recommend_tool for `query`, then `calls` made for it in turn; recommend_tool asked again."""
    ok(await client.call_tool("recommend_tool", {"query": query}))
    for tool, arguments in calls:
        await client.call_tool(tool, arguments)
    return ok(await client.call_tool("recommend_tool", {"query": query}))


async def test_after_each_listed_tool_failed_for_a_request_nothing_fits_it(tmp_path: Path) -> None:
    failing = [
        (NOW, {"timezone": "Tokyo/Alarm"}),
        (CONVERT, {"source_timezone": "Tokyo/Alarm", "time": "07:00", "target_timezone": "UTC"}),
    ]
    async with serving(tmp_path, **servers()) as client:
        first = ok(await client.call_tool("recommend_tool", {"query": UNSERVED}))
        again = await tries(client, UNSERVED, failing)
    assert not first["nothing_fits"]  # its words are the time tools'
    assert again["nothing_fits"] and again["recommendations"]


async def test_a_request_that_worked_once_is_still_answered_and_one_tool_failing_twice_is_a_retry(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path, **servers()) as client:
        worked = await tries(
            client,
            RELATED,
            [
                (CONVERT, {"source_timezone": "Nowhere/Land", "time": "07:00", "target_timezone": "UTC"}),
                (NOW, {"timezone": "Nowhere/Land"}),
                (NOW, {"timezone": "Asia/Tokyo"}),
            ],
        )
    async with serving(tmp_path / "retry", **servers()) as client:
        retried = await tries(client, UNSERVED, [(NOW, {"timezone": "Tokyo/Alarm"}), (NOW, {"timezone": "Tokyo/A"})])
    assert not worked["nothing_fits"]
    assert not retried["nothing_fits"]
