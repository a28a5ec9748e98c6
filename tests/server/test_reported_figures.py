"""The figures toolwise's own tools report are JSON numbers a client's schema check accepts, whatever the
policy ranks with."""

from __future__ import annotations

import math
from pathlib import Path

import anyio

from tests.server.surface import ok, running

ECHO = "toy__echo"


async def test_ucb_reports_a_tool_never_tried_here_with_a_number_the_output_schema_accepts(tmp_path: Path) -> None:
    """UCB ranks an arm never tried in a context first with an infinite score; JSON has no infinity (it
    went out as null and the SDK's client refused the whole answer)."""
    async with running(tmp_path, policy="ucb", exposure="search") as (app, client):
        with anyio.fail_after(10):
            await app.learning.until_loaded()
            while app.learning.catching_up:
                await anyio.sleep(0.01)
        await client.call_tool(ECHO, {"text": "hi"})
        recommended = ok(await client.call_tool("recommend_tool", {"query": "echo this text", "top_k": 50}))
        found = ok(await client.call_tool("search_tools", {"query": "echo this text", "top_k": 50}))
    scores = [r["score"] for r in recommended["recommendations"]]
    assert recommended["policy"] == "ucb" and len(scores) == 7
    assert all(isinstance(s, float) and math.isfinite(s) for s in scores)
    assert scores[1:] == sorted(scores[1:], reverse=True)  # best first (an explored pick may lead)
    assert all(isinstance(t["score"], float) and math.isfinite(t["score"]) for t in found["tools"])
