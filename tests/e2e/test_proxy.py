from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from tests.e2e.conftest import direct, kill_marked, rows, time_server, toolwise
from tests.server.surface import as_meta, execution_of, text

CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_tools_are_listed_with_names_schemas_and_annotations(
    write_config: Callable[..., Path], mode: str
) -> None:
    async with direct("mcp-server-time", "--local-timezone", "UTC", mode=mode) as time_client:
        originals = {t.name: t for t in (await time_client.list_tools()).tools}
    async with toolwise(write_config(), mode=mode) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
    for name, original in originals.items():
        proxied = listed[f"time__{name}"]
        assert proxied.description == original.description
        assert proxied.input_schema == original.input_schema
        assert proxied.output_schema == original.output_schema
        assert proxied.annotations == original.annotations
    assert {"git__git_status", "git__git_diff_unstaged", "recommend_tool", "submit_feedback"} <= listed.keys()
    annotations = listed["recommend_next_tools"].annotations
    assert annotations is not None and annotations.read_only_hint is True
    assert listed["recommend_tool"].output_schema is not None


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_calls_are_forwarded_with_identical_results(
    write_config: Callable[..., Path], repo: Path, mode: str
) -> None:
    async with (
        direct("mcp-server-time", "--local-timezone", "UTC", mode=mode) as t,
        direct("mcp-server-git", mode=mode) as g,
    ):
        expected_time = await t.call_tool("convert_time", CONVERT)
        expected_git = await g.call_tool("git_status", {"repo_path": str(repo)})
    async with toolwise(write_config(), mode=mode) as client:
        got_time = await client.call_tool("time__convert_time", CONVERT)
        got_git = await client.call_tool("git__git_status", {"repo_path": str(repo)})
    for got, expected in ((got_time, expected_time), (got_git, expected_git)):
        assert got.content == expected.content
        assert got.structured_content == expected.structured_content
        assert got.is_error == expected.is_error
        assert uuid.UUID(execution_of(got))
    assert "modified:   README" in text(got_git)


async def test_every_call_is_recorded_even_failures(write_config: Callable[..., Path], tmp_path: Path) -> None:
    ids = []
    async with toolwise(write_config({"time": time_server()})) as client:
        for _ in range(5):
            ids.append((await client.call_tool("time__get_current_time", {"timezone": "UTC"})).meta)
        bad = await client.call_tool("time__get_current_time", {"timezone": "Not/AZone"})
        wrong_type = await client.call_tool("time__convert_time", {"time": 5})
    assert bad.is_error and wrong_type.is_error
    recorded = rows(tmp_path / "toolwise.db", "SELECT tool, success, error_type, latency_ms FROM executions")
    assert len(recorded) == 7
    assert sum(1 for _, success, _, _ in recorded if not success) == 2
    assert {e for _, s, e, _ in recorded if not s} == {"ToolError", "InvalidArgumentsError"}  # refused by schema
    assert all(latency > 0 for *_, latency in recorded)


async def test_rating_changes_the_recorded_reward(write_config: Callable[..., Path], tmp_path: Path) -> None:
    # latency weights off, so twin calls earn the same reward and the rating's effect is exact
    weights = {"success": 10, "failure": -5, "rating_per_point": 2, "latency_per_second": 0, "fast_bonus": 0}
    async with toolwise(write_config({"time": time_server()}, reward=weights)) as client:
        unrated = execution_of(await client.call_tool("time__get_current_time", {"timezone": "UTC"}))
        call = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        execution_id = execution_of(call)
        rated = await client.call_tool("submit_feedback", {"rating": 1, "execution_id": execution_id})
        assert not rated.is_error, text(rated)
        for bad in ({"rating": 0}, {"rating": 6}, {"rating": "five"}, {"rating": 3, "execution_id": "nope"}):
            refused = await client.call_tool("submit_feedback", bad)
            assert refused.is_error
        assert "rating" in text(await client.call_tool("submit_feedback", {"rating": 6}))
        assert "nope" in text(await client.call_tool("submit_feedback", {"rating": 3, "execution_id": "nope"}))
    rewards = dict(rows(tmp_path / "toolwise.db", "SELECT id, reward FROM executions"))
    assert rewards[execution_id] == pytest.approx(rated.structured_content["reward"])
    # rating 1 costs (1 − 3) × 2 = 4 against its unrated twin
    assert rewards[unrated] == pytest.approx(10)
    assert rewards[execution_id] == pytest.approx(6)
    assert rows(tmp_path / "toolwise.db", "SELECT rating FROM ratings") == [(1,)]


async def test_recommendations_shift_after_feedback(write_config: Callable[..., Path], repo: Path) -> None:
    """Users of many sessions ask the same kind of thing, rate the first pick 1 and the other 5."""
    query, pair = "show me what is going on in my repository", ["git__git_status", "git__git_log"]

    async def session(client: Client, sid: str, tool: str | None, rating: int) -> str:
        meta = as_meta({"toolwise/session_id": sid})
        pick = await client.call_tool("recommend_tool", {"query": query, "candidates": pair, "session_id": sid})
        tool = tool or pick.structured_content["recommendations"][0]["tool"]
        await client.call_tool(tool, {"repo_path": str(repo)}, meta=meta)
        rated = await client.call_tool("submit_feedback", {"rating": rating, "tool": tool, "session_id": sid})
        assert not rated.is_error, text(rated)
        return tool

    async with toolwise(write_config()) as client:
        first = await session(client, "s-0", None, 1)
        other = next(t for t in pair if t != first)
        for i in range(1, 9):
            await session(client, f"s-{i}-a", first, 1)
            await session(client, f"s-{i}-b", other, 5)
        last = await client.call_tool("recommend_tool", {"query": query, "candidates": pair, "session_id": "new"})
    assert last.structured_content["recommendations"][0]["tool"] == other


async def test_the_call_right_after_a_downstream_dies_goes_to_the_restarted_process(
    write_config: Callable[..., Path],
) -> None:
    marker = uuid.uuid4().hex
    config = write_config({"time": time_server(marker)}, restart_backoff_s=0.2)
    async with toolwise(config) as client:
        assert not (await client.call_tool("time__get_current_time", {"timezone": "UTC"})).is_error
        assert kill_marked(marker) >= 1
        await asyncio.sleep(0.05)
        after = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        assert not after.is_error, text(after)
        stats = (await client.call_tool("get_learning_stats", {})).structured_content
    [time] = stats["downstreams"]
    assert time["restarts"] == 1 and time["state"] == "ready" and time["error"] is None


async def test_a_downstream_that_fails_to_start_leaves_the_rest_working(write_config: Callable[..., Path]) -> None:
    config = write_config({"broken": {"command": "toolwise-no-such-server"}, "time": time_server()})
    async with toolwise(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "time__get_current_time" in names and not any(n.startswith("broken__") for n in names)
        assert not (await client.call_tool("time__get_current_time", {"timezone": "UTC"})).is_error
        stats = (await client.call_tool("get_learning_stats", {})).structured_content
    health = {d["server"]: d for d in stats["downstreams"]}
    assert health["broken"]["state"] == "failed" and health["broken"]["error"]
    assert health["time"]["state"] == "ready"


async def test_bad_input_to_our_tools_is_an_mcp_error_naming_the_problem(write_config: Callable[..., Path]) -> None:
    async with toolwise(write_config(servers={"time": time_server()})) as client:
        cases: dict[tuple[str, str], dict[str, object]] = {
            ("recommend_tool", "query"): {"top_k": 3},
            ("recommend_tool", "nope__x"): {"query": "x", "candidates": ["nope__x"]},
            ("recommend_next_tools", "nope__y"): {"recent_tools": ["nope__y"]},
            ("end_session", "outcome"): {"outcome": "great"},
            ("end_session", "no calls"): {"outcome": "success"},
            ("get_tool_metrics", "extra"): {"tool": "x", "extra": 1},
        }
        for (tool, needle), args in cases.items():
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, args)
            assert needle in text(result), (tool, text(result))
        with pytest.raises(MCPError) as unknown:  # the spec: an unknown tool is -32602, not a tool result
            await client.call_tool("nope__tool", {})
        assert unknown.value.code == INVALID_PARAMS and "nope__tool" in unknown.value.error.message


async def test_sessions_feed_next_tool_suggestions_and_episodes(
    write_config: Callable[..., Path], repo: Path, tmp_path: Path
) -> None:
    async with toolwise(write_config()) as client:
        for i in range(3):
            sid = f"agent-{i}"
            meta = as_meta({"toolwise/session_id": sid})
            await client.call_tool("git__git_status", {"repo_path": str(repo)}, meta=meta)
            await client.call_tool("git__git_diff_unstaged", {"repo_path": str(repo)}, meta=meta)
            ended = await client.call_tool("end_session", {"outcome": "success", "session_id": sid})
            assert ended.structured_content["tools"] == ["git__git_status", "git__git_diff_unstaged"]
        nxt = await client.call_tool("recommend_next_tools", {"recent_tools": ["git__git_status"]})
        sequences = await client.call_tool("get_successful_sequences", {})
    [top] = nxt.structured_content["recommendations"][:1]
    assert top["tool"] == "git__git_diff_unstaged" and top["count"] == 3
    assert "git__git_status → git__git_diff_unstaged (3×, 100% success)" in top["reason"]
    assert "git__git_diff_unstaged" in text(sequences)
    assert len(rows(tmp_path / "toolwise.db", "SELECT outcome FROM episodes")) == 3


async def test_a_lone_call_is_recorded_without_waiting_for_another(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    """Recording is deferred off the call's path, but never waits for a next call or shutdown."""
    async with toolwise(write_config({"time": time_server()})) as client:
        call = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
        execution_id = execution_of(call)
        for _ in range(100):
            await asyncio.sleep(0.05)
            if rows(tmp_path / "toolwise.db", "SELECT id FROM executions") == [(execution_id,)]:
                break
        assert rows(tmp_path / "toolwise.db", "SELECT id FROM executions") == [(execution_id,)]
