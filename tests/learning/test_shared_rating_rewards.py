"""A rating learned from the shared log (another instance's sync, or a restart's replay) moves the call's
stored reward by the rating's points, as the instance that served the call learned it live: the speed bonus
stays as judged when the call was made, not against the tool's mean latency when the rating is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.learning.test_sharing import _learned
from tests.server.test_persistence import service
from toolwise.downstream.outcome import CallOutcome
from toolwise.feedback import utcnow
from toolwise.server.services import Services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


def _call(services: Services, latency_ms: float) -> str:
    return services.learning.note(
        services.learning.sessions.get("s"),
        tool="git__git_log",
        server="git",
        arguments=None,
        outcome=CallOutcome(result_size=10),
        started_at=utcnow(),
        latency_ms=latency_ms,
    )


def _estimates(services: Services) -> list[float]:
    """What was learned for the rated call's own context (the calls carry no query; it was the third)."""
    return [expected for _, expected, _ in services.learning.learner.estimates(None, "git__git_log", 2)]


@pytest.mark.parametrize("policy", ["outcome", "ucb"])  # learns from outcomes; learns the reward itself
async def test_a_rating_of_a_call_fast_when_made_is_learned_from_the_log_as_it_was_live(url: str, policy: str) -> None:
    feedback, a = await service(url, policy=policy)
    other_feedback, b = await service(url, policy=policy)
    for _ in range(2):
        _call(a, 1000.0)
    fast = _call(a, 100.0)  # fast against the tool's mean then (1 s): the speed bonus
    for _ in range(30):
        _call(a, 20.0)  # not fast against the mean now
    await a.learning.drain()
    found = await feedback.reads.get_execution(fast)
    assert found is not None and found.reward is not None
    stored = found.reward
    _, live = await a.agent.rate(a.learning.sessions.get("s"), 5, fast, None, None)
    assert live == pytest.approx(stored + 4)  # (5 − 3) × 2
    await feedback.flush()
    assert await b.sharing.sync() == 33 + 1
    assert b.learning.learner.reward_sum == pytest.approx(a.learning.learner.reward_sum)  # get_learning_stats'
    assert _estimates(b) == pytest.approx(_estimates(a))
    assert _learned(b) == _learned(a)
    await other_feedback.aclose()
    await feedback.aclose()


async def test_a_rating_a_sync_learned_before_its_rater_is_stored_moved_by_its_points(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The instance's own sync (every sync_interval_s) can learn a rating between its commit and the rater's
    learning step, which then skips it: the reward it answered and stored was recomputed against the tool's
    mean latency now, not the call's reward moved by the rating's points, and other instances learn from it."""
    feedback, a = await service(url)
    for _ in range(2):
        _call(a, 1000.0)
    fast = _call(a, 100.0)
    for _ in range(30):
        _call(a, 20.0)
    await a.learning.drain()
    found = await feedback.reads.get_execution(fast)
    assert found is not None and found.reward is not None
    read_learned, synced = a.learning.read_learned, []

    async def a_sync_first(learn: Any) -> Any:
        await feedback.flush()
        synced.append(await a.sharing.sync())
        return await read_learned(learn)

    monkeypatch.setattr(a.learning, "read_learned", a_sync_first)
    _, reward = await a.agent.rate(a.learning.sessions.get("s"), 5, fast, None, None)
    rated = await feedback.reads.get_execution(fast)
    assert synced == [1] and rated is not None
    assert reward == rated.reward == pytest.approx(found.reward + 4)
    await feedback.aclose()


async def test_a_rating_read_from_the_log_before_its_rater_learned_it_is_learned_as_the_rater_does(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another instance's sync can read a rating between its commit and the rater's learning of it (every
    sync_interval_s, while the rater waits for its learning thread): the call's stored reward must already
    include it then, or that instance learns the rating from a reward a rating short."""
    feedback, a = await service(url)
    other_feedback, b = await service(url)
    for _ in range(2):
        _call(a, 1000.0)
    fast = _call(a, 100.0)
    await a.learning.drain()
    await feedback.flush()
    assert await b.sharing.sync() == 3
    read_learned, synced = a.learning.read_learned, []

    async def b_syncs_first(learn: Any) -> Any:
        synced.append(await b.sharing.sync())
        return await read_learned(learn)

    monkeypatch.setattr(a.learning, "read_learned", b_syncs_first)
    await a.agent.rate(a.learning.sessions.get("s"), 5, fast, None, None)
    assert synced == [1]
    assert b.learning.learner.reward_sum == pytest.approx(a.learning.learner.reward_sum)
    assert _estimates(b) == pytest.approx(_estimates(a))
    await other_feedback.aclose()
    await feedback.aclose()
