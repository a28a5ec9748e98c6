"""A session's end and a rating of a call named by its tool are learned after the call they are about,
though calls of the session go on beside them (an agent's parallel tool calls): a call noted while
end_session or submit_feedback waited for the drain is their subject only once it is learned and recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_persistence import proxied, service
from toolwise.rl import Step
from toolwise.server.services import Services


def noting_after_drain(monkeypatch: pytest.MonkeyPatch, services: Services, session_id: str, tool: str) -> list[str]:
    """The next drain, once done, sees a call of `tool` noted in `session_id` (as a call of the session that
    finished while the drain ran would be); the ids noted so far are returned in the list."""
    learning, noted = services.learning, list[str]()
    drain = learning.drain

    async def drain_then_a_call() -> None:
        await drain()
        if not noted:
            noted.append(proxied(services, session_id, tool))

    monkeypatch.setattr(learning, "drain", drain_then_a_call)
    return noted


async def test_a_call_noted_while_an_end_waited_for_the_drain_is_learned_before_the_end_that_follows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    learning = services.learning
    first = proxied(services, "s", "git__git_status")
    await learning.drain()
    ended: list[Step] = []
    end_episode = learning.learner.end_episode

    def spy(step: Step, reward: float, *args: Any, **kwargs: Any) -> Any:
        ended.append(step)
        return end_episode(step, reward, *args, **kwargs)

    monkeypatch.setattr(learning.learner, "end_episode", spy)
    noted = noting_after_drain(monkeypatch, services, "s", "git__git_log")
    episode = await services.agent.end_session("s", "success")
    last = await feedback.reads.get_execution(episode.last_execution or "")
    assert last is not None and last.reward is not None, "the episode ends after a call not recorded with its reward"
    assert [step.tool for step in ended] == [last.tool], "the session's end was never learned"
    assert noted == [last.id] and episode.tools == ["git__git_status", "git__git_log"]
    earlier = await feedback.reads.get_execution(first)
    assert earlier is not None and earlier.reward is not None
    assert episode.total_reward == pytest.approx(earlier.reward + last.reward), "its last call's reward is left out"
    await feedback.aclose()


async def test_a_rating_by_tool_of_a_call_noted_while_it_waited_for_the_drain_rates_that_call_once_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    learning = services.learning
    session = learning.sessions.get("s")
    proxied(services, "s", "git__git_log")
    await learning.drain()
    noted = noting_after_drain(monkeypatch, services, "s", "git__git_log")
    execution, reward = await services.agent.rate(session, 5, None, "git__git_log", None)
    assert [execution.id] == noted  # the session's latest call of the tool, as the rating asked
    stored = await feedback.reads.get_execution(execution.id)
    assert stored is not None and stored.reward == pytest.approx(reward) and reward > 10
    await feedback.aclose()


async def _slow(turns: int) -> None:
    """A write that takes `turns` turns of the event loop (a database slower than the shutdown's first steps)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_shutdown_waits_for_an_end_and_a_rating_whose_callers_went_away(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client closing its connection cancels its requests in flight (the SDK does, at EOF), then the server
    shuts down: an end_session and a submit_feedback go on without their callers (`Agent`), and were still
    recording when the feedback service closed under them: the episode and the rated call's reward lost."""
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    learning, agent, log = services.learning, services.agent, feedback.log
    rated = proxied(services, "r", "git__git_log")
    proxied(services, "s", "git__git_status")
    await learning.drain()
    record_episode, add_rating, writing, written = log.record_episode, log.add_rating, asyncio.Event(), []

    async def slow_episode(episode: Any) -> Any:
        writing.set()
        await _slow(100)
        recorded = await record_episode(episode)
        written.append("episode")
        return recorded

    async def slow_rating(*args: Any, **kwargs: Any) -> Any:  # the rating and its reward, in one commit
        writing.set()
        await _slow(100)
        event = await add_rating(*args, **kwargs)
        written.append("rating")
        return event

    monkeypatch.setattr(log, "record_episode", slow_episode)
    monkeypatch.setattr(log, "add_rating", slow_rating)
    for request in (
        agent.end_session("s", "success"),
        agent.rate(learning.sessions.get("r"), 1, rated, None, None),
    ):
        writing.clear()
        asked = asyncio.ensure_future(request)
        await writing.wait()
        asked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asked
    await learning.aclose()  # the shutdown: then its snapshot, then the feedback service closes
    assert sorted(written) == ["episode", "rating"], "the shutdown went on while they were being written"
    await feedback.flush()
    stored = await feedback.reads.get_execution(rated)
    assert stored is not None and stored.reward is not None and stored.reward < 10, "the rating's reward was lost"
    assert (await feedback.reads.heads(learning.namespace))[2] == 1, "the episode was lost"
    await feedback.aclose()
