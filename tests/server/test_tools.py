"""toolwise's own tools through the MCP surface: what each answers, what it records, how it refuses
bad input. In-process through `Client(server)` (handshake era: one connection, one session), the toy
downstream in a real process, a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp.shared.exceptions import MCPError

from tests.feedback.exact_metrics import recompute_tool_metrics
from tests.server.surface import as_model_reads, execution_of, llama2_tokens, ok, rows, serving, text
from toolwise.feedback import FeedbackService
from toolwise.server.admin_tools import ToolMetricsOutput
from toolwise.server.tools import own_tools

ECHO, FAIL = "toy__echo", "toy__fail"


async def test_recommend_tool_ranks_only_the_candidates_and_returns_a_decision(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        answer = ok(
            await client.call_tool(
                "recommend_tool", {"query": "echo this text back", "candidates": [ECHO, FAIL], "top_k": 2}
            )
        )
        top = ok(await client.call_tool("recommend_tool", {"query": "echo this text back", "top_k": 1}))
    assert {r["tool"] for r in answer["recommendations"]} == {ECHO, FAIL}
    assert len(answer["context_hash"]) == 64 and answer["decision_id"] and answer["policy"]
    for r in answer["recommendations"]:
        assert 0 <= r["confidence"] <= 1 and 0 <= r["relevance"] <= 1 and r["reason"].startswith("relevance")
    assert len(top["recommendations"]) == 1


async def test_recommend_tool_refuses_a_candidate_it_does_not_know_by_name(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        result = await client.call_tool("recommend_tool", {"query": "echo", "candidates": [ECHO, "toy__nope"]})
    assert result.is_error and text(result) == "recommend_tool: unknown tool(s): toy__nope"


async def test_a_call_after_a_recommendation_is_recorded_with_its_decision_and_query(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        decision = ok(await client.call_tool("recommend_tool", {"query": "say hello", "candidates": [ECHO]}))
        await client.call_tool(ECHO, {"text": "hello"})
    assert rows(tmp_path, "SELECT decision_id, query, context_hash FROM executions") == [
        (decision["decision_id"], "say hello", decision["context_hash"])
    ]


async def test_recommend_next_tools_suggests_what_followed_in_the_session(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        for _ in range(2):
            await client.call_tool(FAIL, {"reason": "first"})
            await client.call_tool(ECHO, {"text": "then"})
        after_fail = ok(await client.call_tool("recommend_next_tools", {"recent_tools": [FAIL]}))
        own = ok(await client.call_tool("recommend_next_tools", {}))  # the session's own calls
        sequences = ok(await client.call_tool("get_successful_sequences", {"tool": ECHO}))
    assert [(r["tool"], r["count"]) for r in after_fail["recommendations"]][:1] == [(ECHO, 2)]
    assert own["recent_tools"] == [FAIL, ECHO, FAIL, ECHO]
    # every fail failed and the agent moved on to echo: a correction, not a sequence that worked
    assert [FAIL, ECHO] not in [s["sequence"] for s in sequences["sequences"]]


async def test_right_after_a_failed_call_recommend_next_tools_suggests_the_retry(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        for _ in range(2):  # the agent retries the tool that failed, then moves on
            await client.call_tool(FAIL, {"reason": "first"})
            await client.call_tool(FAIL, {"reason": "again"})
            await client.call_tool(ECHO, {"text": "then"})
        await client.call_tool(FAIL, {"reason": "once more"})
        after_fail = ok(await client.call_tool("recommend_next_tools", {"top_k": 2}))
    [retry, other] = after_fail["recommendations"]
    assert retry["tool"] == FAIL and retry["p_agent"] == retry["score"] > other["p_agent"]
    assert 0 < retry["p_works"] < 0.5 < other["p_works"] < 1, "every call of it failed; every echo worked"


async def test_recommend_next_tools_names_the_recent_tools_it_does_not_know(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        result = await client.call_tool("recommend_next_tools", {"recent_tools": [ECHO, "toy__ghost"]})
    assert result.is_error and text(result) == "recommend_next_tools: unknown tool(s): toy__ghost"


async def test_a_downstreams_own_tool_name_is_answered_with_the_name_toolwise_lists(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        await client.call_tool(ECHO, {"text": "x"})
        metrics = await client.call_tool("get_tool_metrics", {"tool": "echo"})
        following = await client.call_tool("recommend_next_tools", {"recent_tools": ["echo", "toy__ghost"]})
        ranked = await client.call_tool("recommend_tool", {"query": "echo", "candidates": ["echo"]})
    assert text(metrics) == "No executions of 'echo' recorded; did you mean 'toy__echo'?"
    assert following.is_error
    assert text(following) == "recommend_next_tools: unknown tool(s): echo (did you mean 'toy__echo'?), toy__ghost"
    assert ranked.is_error and text(ranked) == "recommend_tool: unknown tool(s): echo (did you mean 'toy__echo'?)"


async def test_submit_feedback_rates_the_sessions_latest_call_of_a_tool_and_changes_its_reward(tmp_path: Path) -> None:
    weights = {"success": 10, "failure": -5, "rating_per_point": 2, "latency_per_second": 0, "fast_bonus": 0}
    async with serving(tmp_path, reward=weights) as client:
        await client.call_tool(ECHO, {"text": "first"})
        latest = execution_of(await client.call_tool(ECHO, {"text": "second"}))
        rated = ok(await client.call_tool("submit_feedback", {"rating": 5, "tool": ECHO, "comment": "spot on"}))
    assert rated == {"execution_id": latest, "tool": ECHO, "rating": 5, "reward": pytest.approx(14)}
    assert rows(tmp_path, "SELECT execution_id, rating, comment FROM ratings") == [(latest, 5, "spot on")]
    assert dict(rows(tmp_path, "SELECT id, reward FROM executions"))[latest] == pytest.approx(14)


async def test_submit_feedback_given_a_tool_and_another_tool_s_execution_id_rates_neither(tmp_path: Path) -> None:
    """The agent that names the tool it rates means that tool: a rating of `toy__fail` was stored on the echo
    call whose id came with it (the answer's `tool` the only sign), learned as a verdict on echo."""
    async with serving(tmp_path) as client:
        echoed = execution_of(await client.call_tool(ECHO, {"text": "kept"}))
        refused = await client.call_tool("submit_feedback", {"rating": 1, "tool": FAIL, "execution_id": echoed})
        same = ok(await client.call_tool("submit_feedback", {"rating": 4, "tool": ECHO, "execution_id": echoed}))
    assert refused.is_error
    assert text(refused) == (
        f"submit_feedback: execution_id {echoed!r} is a call of {ECHO!r}, not of {FAIL!r}: "
        "pass the execution_id of a call of that tool, or the tool alone to rate its newest call"
    )
    assert same["tool"] == ECHO and rows(tmp_path, "SELECT execution_id, rating FROM ratings") == [(echoed, 4)]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"rating": 0}, "rating"),
        ({"rating": 4.5}, "rating"),
        ({"rating": 3, "execution_id": "no-such-call"}, "no-such-call"),
        ({"rating": 3, "tool": "toy__ghost"}, "toy__ghost"),
    ],
    ids=["rating-below-1", "rating-not-an-integer", "unknown-execution", "unknown-tool"],
)
async def test_submit_feedback_refuses_bad_input_naming_what_was_wrong(
    tmp_path: Path, arguments: dict[str, object], named: str
) -> None:
    async with serving(tmp_path) as client:
        await client.call_tool(ECHO, {"text": "something to rate"})
        result = await client.call_tool("submit_feedback", arguments)
    assert result.is_error and named in text(result)
    assert rows(tmp_path, "SELECT count(*) FROM ratings") == [(0,)]


async def test_end_session_records_the_episode_with_its_tools_and_total_reward(tmp_path: Path) -> None:
    weights = {"success": 10, "failure": -5, "rating_per_point": 2, "latency_per_second": 0, "fast_bonus": 0}
    async with serving(tmp_path, reward=weights) as client:
        await client.call_tool(ECHO, {"text": "one"})
        await client.call_tool(FAIL, {"reason": "two"})
        ended = ok(await client.call_tool("end_session", {"outcome": "partial"}))
        refused = await client.call_tool("end_session", {"outcome": "meh"})
    assert ended["tools"] == [ECHO, FAIL] and ended["outcome"] == "partial"
    assert ended["total_reward"] == pytest.approx(5)
    assert refused.is_error and "outcome" in text(refused)
    [(session, tools, total, outcome)] = rows(tmp_path, "SELECT session_id, tools, total_reward, outcome FROM episodes")
    assert (session, json.loads(tools), outcome) == (ended["session_id"], [ECHO, FAIL], "partial")
    assert total == pytest.approx(5)


async def test_get_learning_stats_counts_calls_decisions_and_reports_the_store(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        await client.call_tool("recommend_tool", {"query": "echo", "candidates": [ECHO]})
        for word in ("a", "b", "c"):
            await client.call_tool(ECHO, {"text": word})
        stats = ok(await client.call_tool("get_learning_stats", {}))
        rendered = text(await client.call_tool("get_learning_stats", {}))
    assert (stats["calls"], stats["decisions"], stats["store"]) == (3, 1, "ok")
    assert stats["tools"] == 7 and stats["open_circuits"] == []
    assert [d["server"] for d in stats["downstreams"]] == ["toy"]
    assert "3 calls" in rendered and "toy: ready" in rendered
    assert stats["epsilon"] == 0.0 and stats["reopened_tools"] == [] and stats["drifts"] == []
    assert "exploration: success steady at" in rendered and stats["epsilon_reason"].endswith("ε 0.00")


async def test_get_tool_metrics_counts_calls_successes_and_ratings_per_tool(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        for _ in range(3):
            await client.call_tool(ECHO, {"text": "x"})
        await client.call_tool(FAIL, {"reason": "y"})
        await client.call_tool("submit_feedback", {"rating": 2, "tool": ECHO})
        metrics = {m["tool"]: m for m in ok(await client.call_tool("get_tool_metrics", {}))["metrics"]}
        only = ok(await client.call_tool("get_tool_metrics", {"tool": FAIL}))["metrics"]
        uncalled = await client.call_tool("get_tool_metrics", {"tool": "toy__never"})
    assert text(uncalled) == "No executions of 'toy__never' recorded."  # not "yet": the log has calls
    assert (metrics[ECHO]["calls"], metrics[ECHO]["success_rate"], metrics[ECHO]["avg_rating"]) == (3, 1.0, 2.0)
    assert (metrics[FAIL]["calls"], metrics[FAIL]["success_rate"], metrics[FAIL]["avg_rating"]) == (1, 0.0, None)
    assert [m["tool"] for m in only] == [FAIL]


async def test_get_tool_metrics_answers_what_feedback_holds_valid_against_its_output_schema(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        for _ in range(3):
            await client.call_tool(ECHO, {"text": "x"})
        await client.call_tool(FAIL, {"reason": "y"})
        await client.call_tool("submit_feedback", {"rating": 4, "tool": ECHO})
        [tool] = [t for t in (await client.list_tools()).tools if t.name == "get_tool_metrics"]
        answer = await client.call_tool("get_tool_metrics", {})
        top = ok(await client.call_tool("get_tool_metrics", {"limit": 1}))["metrics"]
        refused = await client.call_tool("get_tool_metrics", {"limit": 0})
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as feedback:
        held = await feedback.reports.get_tool_metrics()
    assert tool.output_schema is not None
    schema = Draft202012Validator(tool.output_schema)
    assert schema.is_valid(ok(answer))
    assert not schema.is_valid({"metrics": [{"tool": ECHO, "calls": 3}]})  # a row missing fields is refused
    assert ToolMetricsOutput.model_validate(answer.structured_content).metrics == held  # every figure, exactly
    assert [m.tool for m in held] == [ECHO, FAIL] and text(answer).splitlines()[0].startswith(f"{ECHO}: 3 calls")
    assert [m["tool"] for m in top] == [ECHO]  # the most called
    assert refused.is_error and "limit" in text(refused)


async def test_get_tool_metrics_answers_the_calls_and_ratings_made_just_before_it(tmp_path: Path) -> None:
    def by_tool(answer: object) -> dict[str, dict[str, object]]:
        return {m["tool"]: m for m in ok(answer)["metrics"]}  # type: ignore[arg-type]

    async with serving(tmp_path) as client:
        await client.call_tool(ECHO, {"text": "x"})
        first = by_tool(await client.call_tool("get_tool_metrics", {}))
        again = by_tool(await client.call_tool("get_tool_metrics", {}))  # nothing happened in between
        await client.call_tool(ECHO, {"text": "y"})
        called = by_tool(await client.call_tool("get_tool_metrics", {}))
        await client.call_tool("submit_feedback", {"rating": 5, "tool": ECHO})
        rated = await client.call_tool("get_tool_metrics", {})
    async with FeedbackService(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}") as feedback:
        recomputed = await recompute_tool_metrics(feedback)
    assert first[ECHO]["calls"] == 1 and again == first
    assert (called[ECHO]["calls"], called[ECHO]["ratings"]) == (2, 0)
    assert (by_tool(rated)[ECHO]["ratings"], by_tool(rated)[ECHO]["avg_rating"]) == (1, 5.0)
    assert "rated 5.0" in text(rated)
    served = ToolMetricsOutput.model_validate(rated.structured_content).metrics
    assert [(m.tool, m.calls, m.ratings, m.avg_rating) for m in served] == [
        (m.tool, m.calls, m.ratings, m.avg_rating) for m in recomputed
    ]


async def test_admin_tools_are_neither_listed_nor_callable_when_admin_tools_is_off(tmp_path: Path) -> None:
    async with serving(tmp_path, admin_tools=False) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        with pytest.raises(MCPError, match="Unknown tool: 'get_learning_stats'"):
            await client.call_tool("get_learning_stats", {})
    assert "recommend_tool" in names
    assert not names & {"get_learning_stats", "get_tool_metrics", "get_successful_sequences", "snapshot_list"}


async def test_snapshot_tools_are_listed_only_when_snapshot_tools_is_on(tmp_path: Path) -> None:
    async with serving(tmp_path) as client:
        off = {t.name for t in (await client.list_tools()).tools}
    async with serving(tmp_path, snapshot_tools=True) as client:
        on = {t.name for t in (await client.list_tools()).tools}
    snapshot = {"snapshot_list", "snapshot_dump", "snapshot_restore"}
    assert not off & snapshot and snapshot <= on


async def test_snapshot_dump_list_and_restore_previous_roll_the_learned_state_back(tmp_path: Path) -> None:
    async with serving(tmp_path, snapshot_tools=True, snapshot_dir=str(tmp_path / "snapshots")) as client:
        first = ok(await client.call_tool("snapshot_dump", {}))["snapshot"]
        await client.call_tool(ECHO, {"text": "learn this"})
        second = ok(await client.call_tool("snapshot_dump", {"output": "second.snapshot"}))
        listed = ok(await client.call_tool("snapshot_list", {}))
        rolled = ok(await client.call_tool("snapshot_restore", {"previous": True}))["snapshot"]
        current = ok(await client.call_tool("snapshot_list", {}))["current"]
        both = await client.call_tool("snapshot_restore", {"previous": True, "snapshot_id": first["id"]})
    assert second["path"] == "second.snapshot" and (tmp_path / "snapshots" / "second.snapshot").exists()
    assert second["snapshot"]["sample_count"] == first["sample_count"] + 1
    assert [s["id"] for s in listed["snapshots"]][:2] == [second["snapshot"]["id"], first["id"]]
    assert listed["current"] == second["snapshot"]["id"]
    assert rolled["source"] == "rollback" and rolled["sample_count"] == first["sample_count"]
    assert current == rolled["id"]
    assert both.is_error and "exactly one of" in text(both)


async def test_a_floor_on_exploration_keeps_a_share_of_picks_exploring(tmp_path: Path) -> None:
    async with serving(tmp_path, epsilon_min=0.3, seed=3) as client:
        with anyio.fail_after(30):  # the policy serves once the start-up has caught up with the log
            while ok(await client.call_tool("get_learning_stats", {}))["serving"] != "outcome":
                await anyio.sleep(0.05)
        for _ in range(100):
            await client.call_tool("recommend_tool", {"query": "answer the text unchanged"})
        stats = ok(await client.call_tool("get_learning_stats", {}))
    assert stats["epsilon"] == pytest.approx(0.3)
    assert stats["decisions"] == 100 and 0.15 <= stats["exploration_rate"] <= 0.45  # about 30 of 100


OWN_TOOLS_BUDGET = 800  # tokens of name, description and input schema, all of toolwise's own tools (issue 38)


async def test_toolwises_own_tools_cost_every_turn_at_most_800_tokens_yet_say_what_a_call_needs(
    tmp_path: Path,
) -> None:
    """With `exposure: all` every turn's tools/list carries toolwise's own tools beside the downstreams':
    the admin ones included, they cost at most 800 Llama 2 tokens (bench/discovery.py's count); the
    listing still names what a call requires, and the bounds and knobs it leaves out still hold."""
    async with serving(tmp_path) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        too_high = await client.call_tool("submit_feedback", {"rating": 9, "tool": ECHO})
        expert = await client.call_tool("evaluate_policy", {"policy": "semantic", "min_propensity": 0.5})
    own = [t for name, t in listed.items() if name in own_tools(admin=True)]
    assert {t.name for t in own} == set(own_tools(admin=True))
    assert llama2_tokens(as_model_reads(own)) <= OWN_TOOLS_BUDGET
    assert listed["recommend_tool"].input_schema["required"] == ["query"]
    assert listed["end_session"].input_schema["properties"]["outcome"] == {"enum": ["success", "partial", "failure"]}
    assert too_high.is_error and "less than or equal to 5" in text(too_high)
    assert "min_propensity" not in listed["evaluate_policy"].input_schema["properties"]
    assert "with one below 0.5," in text(expert)  # accepted though not listed
