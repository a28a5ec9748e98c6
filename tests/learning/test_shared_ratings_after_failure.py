"""A rating of a call that followed a failed one revises the n-grams that call was counted in (the prefixes
marked after a failure: what recommend_next_tools reads after a failed call); another instance learning the
rating from the shared log revises the same ones, not the unmarked ones the call was never counted in."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.learning.test_sharing import _call
from tests.server.test_persistence import service
from toolwise.rl import NextTool
from toolwise.server.services import Services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


def after_a_failed_status(services: Services) -> list[NextTool]:
    learner = services.learning.learner
    return learner.recommend_next(["git__git_status"], learner.index.active_names, 3, after_failure=True)


async def test_another_instance_revises_the_n_grams_a_rated_call_after_a_failure_was_counted_in(url: str) -> None:
    feedback, a = await service(url)
    other_feedback, b = await service(url)
    for name in ("s1", "s2", "s3"):
        _call(a, name, ok=False, tool="git__git_status")
        _call(a, name, ok=True, tool="git__git_diff")
        await a.learning.drain()
        await a.agent.rate(a.learning.sessions.get(name), 1, None, "git__git_diff", None)
    await a.learning.drain()
    await feedback.flush()
    await b.sharing.sync()
    assert after_a_failed_status(b) == after_a_failed_status(a)
    assert b.learning.learner.sequences.top_sequences() == a.learning.learner.sequences.top_sequences()
    await other_feedback.aclose()
    await feedback.aclose()
