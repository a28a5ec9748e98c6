"""What an instance keeps of the sessions it learns from the shared log is bounded whatever their length:
a session of another instance's that goes on for ever (a stdio client's connection) keeps its recent tools
only, as that instance's own memory of it does. In-process against a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.test_growth import proxied
from tests.server.test_persistence import service


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_long_session_learned_from_the_log_keeps_a_bounded_window_of_tools(url: str) -> None:
    feedback, services = await service(url, session_window=8)
    other_feedback, other = await service(url, session_window=8)
    tools = ["git__git_status", "git__git_log", "git__git_diff"]
    for i in range(600):
        proxied(services, "long", tools[i % 3])
    await services.learning.drain()
    await feedback.flush()
    assert await other.sharing.sync() == 600
    kept = other.sharing._logged["long"]
    assert len(kept) <= 16  # tools remembered
    assert kept.before(600, other.learning.history_n) == [tools[i % 3] for i in range(600 - 2, 600)]  # still in order
    proxied(services, "long", tools[0])
    await services.learning.drain()
    await feedback.flush()
    assert await other.sharing.sync() == 1  # and goes on with the session
    assert other.sharing._logged["long"].before(601, 2) == [tools[599 % 3], tools[0]]
    await other_feedback.aclose()
    await feedback.aclose()
