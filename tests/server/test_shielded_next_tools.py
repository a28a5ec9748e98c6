"""recommend_next_tools leaves out a tool its shield blocks (its downstream failing or slow), as
recommend_tool does: an agent following the suggestion would call a tool toolwise already knows is failing;
when every tool is blocked it still answers (nothing would be left). In-process against a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.test_persistence import call, service
from toolwise.server.recommend import RecommendNextInput, recommend_next_tools


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_shielded_tool_is_not_suggested_next(url: str) -> None:
    feedback, services = await service(url, shield_min_calls=3, shield_failure_rate=0.5)
    for i in range(4):  # after the status the agent looks at the log, then at the diff, which fails
        await call(services, f"s{i}", "what changed", "git__git_status")
        await call(services, f"s{i}", "what changed", "git__git_log")
        await call(services, f"s{i}", "what changed", "git__git_status")
        await call(services, f"s{i}", "what changed", "git__git_diff", ok=False)
    assert "git__git_diff" in services.learning.shields.blocked(0.0)
    asked = RecommendNextInput(recent_tools=["git__git_status"])
    answer = await recommend_next_tools(services, asked, services.learning.sessions.get("y"))
    assert [r.tool for r in answer.recommendations][:1] == ["git__git_log"]
    assert "git__git_diff" not in [r.tool for r in answer.recommendations]
    await feedback.aclose()
