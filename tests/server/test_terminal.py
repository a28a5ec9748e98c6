"""Ending a session tells a TD learner that its last step was terminal: the value of that step is no
longer bootstrapped from a next step that never came (bandits have no future term: nothing to learn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.test_growth import proxied
from tests.server.test_persistence import service


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_ending_a_session_learns_its_last_call_as_a_terminal_transition(url: str) -> None:
    feedback, services = await service(url, policy="ucb")
    for tool in ("git__git_status", "git__git_log"):
        proxied(services, "s", tool)
    await services.learning.drain()
    learner = services.learning.learner
    terminal = [t for t in learner.replay.items if t is not None and t.next_context < 0]
    assert terminal == []  # both calls were learned with a future term
    updates = learner.updates
    await services.learning.end_session("s", "success")
    terminal = [t for t in learner.replay.items if t is not None and t.next_context < 0]
    assert [learner.tools.names[t.tool] for t in terminal] == ["git__git_log"]
    assert learner.updates == updates + 1
    await feedback.aclose()


async def test_ending_a_session_adds_nothing_for_a_bandit(url: str) -> None:
    feedback, services = await service(url)  # the default policy, a contextual bandit
    proxied(services, "s", "git__git_log")
    await services.learning.drain()
    updates = services.learning.learner.updates
    await services.learning.end_session("s", "success")
    assert services.learning.learner.updates == updates
    await feedback.aclose()
