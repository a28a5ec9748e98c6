"""recommend_tool on the README's own example (mcp-server-time and mcp-server-git, real processes),
through an in-process `Client(server)`: what a new user sees before much was learned."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
from mcp import Client

from tests.e2e.conftest import time_server
from tests.server.surface import ok
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

SERVERS = {"time": time_server(), "git": {"command": "mcp-server-git"}}


def config(tmp_path: Path) -> AppConfig:
    database = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    # every downstream up before the first request (a loaded machine starts mcp-server-git in over 5 s, the default)
    toolwise = {"database_url": database, "seed": 7, "start_wait_s": 60}
    return AppConfig.model_validate({"mcpServers": SERVERS, "toolwise": toolwise})


async def test_no_tool_that_changes_the_repository_is_first_for_a_request_that_reads(tmp_path: Path) -> None:
    reading = [
        "what changed",
        "which files did I modify",
        "what's the state of the repo",
        "compare my branch with main",
    ]
    async with Toolwise(config(tmp_path)) as app, Client(build_server(app)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        firsts = [
            ok(await client.call_tool("recommend_tool", {"query": q, "top_k": 1}))["recommendations"][0]["tool"]
            for q in reading
        ]
    annotations = [tools[t].annotations for t in firsts]
    assert all(a is not None and a.read_only_hint for a in annotations), firsts


async def test_a_request_to_act_that_names_what_a_tool_does_gets_that_tool_first(tmp_path: Path) -> None:
    """mcp-server-git's own descriptions ("Switches branches", "Unstages all staged changes"): the request
    asks for that action, so the tool that changes the repository is first, caution or not."""
    asked = {"switch to the develop branch": "git__git_checkout", "unstage everything": "git__git_reset"}
    async with Toolwise(config(tmp_path)) as app, Client(build_server(app)) as client:
        firsts = {
            q: ok(await client.call_tool("recommend_tool", {"query": q, "top_k": 1}))["recommendations"][0]["tool"]
            for q in asked
        }
    assert firsts == asked


async def test_a_probability_after_a_few_calls_is_not_reported_as_near_certain(tmp_path: Path, repo: Path) -> None:
    """After 4 calls the choice model's softmax over text scores says 0.9 for a tool: the probability that
    it works, reported, is near "not known" (0.5) until outcomes say more, in the confidence and in the
    reason alike."""
    calls = ["git__git_status", "git__git_diff_unstaged", "git__git_log", "git__git_status"]
    async with Toolwise(config(tmp_path)) as app, Client(build_server(app)) as client:
        with anyio.fail_after(30):  # the policy serves once the start-up has caught up (before: the prior alone)
            while ok(await client.call_tool("get_learning_stats", {}))["serving"] != "outcome":
                await anyio.sleep(0.05)
        for tool in calls:
            assert not (await client.call_tool(tool, {"repo_path": str(repo)})).is_error
        answer = ok(await client.call_tool("recommend_tool", {"query": "show me the recent commits", "top_k": 3}))
    top = answer["recommendations"][0]
    assert top["confidence"] < 0.65, top
    assert re.search(r"probability (\d\.\d\d)", top["reason"])[1] == f"{top['confidence']:.2f}"  # type: ignore[index]
