"""A request cancelled half-way (a client timeout, a user's stop) leaves nothing half-done."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.server.surface import ok, rows, serving, text
from tests.server.test_persistence import proxied, service
from toolwise.downstream.outcome import CallOutcome
from toolwise.feedback import FeedbackService
from toolwise.feedback.records import RatingEvent
from toolwise.server.services import Services

CANCELLED = CallOutcome("CallCancelledError", "call to git__git_log cancelled")


async def test_a_rating_cancelled_once_committed_is_still_learned_and_its_reward_stored(tmp_path: Path) -> None:
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log")
    await services.learning.drain()
    recorded = await feedback.reads.get_execution(execution_id)
    assert recorded is not None and recorded.reward is not None
    before = recorded.reward
    updates = services.learning.learner.updates
    original = feedback.log.add_rating

    async def add_rating(*args: object, **kwargs: object) -> RatingEvent:
        event = await original(*args, **kwargs)  # type: ignore[arg-type]  # forwarded as the caller gave them
        rating.cancel()  # the client gives up just as its rating is committed
        return event

    feedback.log.add_rating = add_rating  # type: ignore[method-assign]  # a spy in its place
    rating = asyncio.create_task(services.agent.rate(session, 1, execution_id, None, None))
    with pytest.raises(asyncio.CancelledError):
        await rating
    await asyncio.sleep(0.5)
    rated = await feedback.reads.get_execution(execution_id)
    assert rated is not None and rated.reward is not None and rated.reward < before  # the low rating's reward is stored
    assert services.learning.learner.updates > updates  # and learned
    await feedback.aclose()


async def test_a_proxied_call_the_client_cancels_is_recorded_as_cancelled_and_not_learned_as_a_failure(
    tmp_path: Path,
) -> None:
    async with serving(tmp_path) as client:  # the toy downstream notes in toy.log that it was told to stop
        with anyio.move_on_after(1):  # the user stops the call
            await client.call_tool("toy__sleep", {"seconds": 30})
        before = ok(await client.call_tool("get_learning_stats", {}))
        after = await client.call_tool("toy__echo", {"text": "after"})  # the next call is served and recorded
        stats = ok(await client.call_tool("get_learning_stats", {}))
    assert text(after) == "after"
    assert (tmp_path / "toy.log").read_text() == "sleep cancelled"  # the downstream was told to stop
    assert before["calls"] == 1 and before["updates"] == 0  # noted, but nothing learned from it
    assert stats["calls"] == 2 and stats["updates"] == 1  # the echo is learned: learning goes on
    recorded = rows(tmp_path, "SELECT tool, success, error_type, error_message, latency_ms, reward FROM executions")
    [sleep, echo] = recorded
    tool, success, error_type, message, latency_ms, reward = sleep
    assert (tool, success, error_type, reward) == ("toy__sleep", 0, "CallCancelledError", None)
    assert "cancelled" in message and "'toy'" in message
    assert latency_ms >= 500  # its real elapsed time (the client waited 1 s), not zero
    assert echo[:3] == ("toy__echo", 1, None) and echo[5] is not None


async def test_a_proxied_call_cut_off_by_its_connection_closing_is_recorded_as_cancelled(tmp_path: Path) -> None:
    async def call_until_cut_off(client: Client) -> None:
        with contextlib.suppress(MCPError):  # the client's side of a connection closed mid-call
            await client.call_tool("toy__sleep", {"seconds": 30})

    async with anyio.create_task_group() as group, serving(tmp_path) as client:
        group.start_soon(call_until_cut_off, client)
        await anyio.sleep(1)  # the call is with the downstream; then the client goes away
    assert rows(tmp_path, "SELECT tool, success, error_type, reward FROM executions") == [
        ("toy__sleep", 0, "CallCancelledError", None)
    ]


async def test_a_cancelled_calls_first_rating_commits_its_reward_with_it(tmp_path: Path) -> None:
    """A cancelled call has no reward until rated: its first rating's commit stores one, so a process that
    dies just after that commit leaves the rating and its reward (not a rating over a null reward)."""
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log", CANCELLED)
    await services.learning.drain()
    original, at_commit = feedback.log.add_rating, []

    async def add_rating(*args: object, **kwargs: object) -> RatingEvent:
        event = await original(*args, **kwargs)  # type: ignore[arg-type]  # forwarded as the caller gave them
        at_commit.extend(rows(tmp_path, "SELECT reward FROM executions"))  # what a crash now would leave
        return event

    feedback.log.add_rating = add_rating  # type: ignore[method-assign]  # a spy in its place
    _, reward = await services.agent.rate(session, 4, execution_id, None, None)
    assert at_commit == [(reward,)]
    assert rows(tmp_path, "SELECT reward FROM executions") == [(reward,)]
    await feedback.aclose()


async def rated_at_once(tmp_path: Path) -> tuple[FeedbackService, Services, str, float, float]:
    """A cancelled call rated 5, then 1 while the 5's rater, its rating committed, is slow to finish: (its
    id, the 1's reward, the 5's reward), once both raters are done."""
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log", CANCELLED)
    await services.learning.drain()
    recorded = await feedback.reads.get_execution(execution_id)
    assert recorded is not None and recorded.reward is None
    original, entered, go = feedback.log.add_rating, asyncio.Event(), asyncio.Event()

    async def add_rating(*args: object, **kwargs: object) -> RatingEvent:
        event = await original(*args, **kwargs)  # type: ignore[arg-type]  # forwarded as the caller gave them
        if not entered.is_set():  # the first rater is slow once its rating is committed
            entered.set()
            await go.wait()
        return event

    feedback.log.add_rating = add_rating  # type: ignore[method-assign]  # a spy in its place
    first = asyncio.create_task(services.agent.rate(session, 5, execution_id, None, None))
    await entered.wait()
    _, latest = await services.agent.rate(session, 1, execution_id, None, None)
    go.set()
    _, earlier = await first
    return feedback, services, execution_id, latest, earlier


async def test_two_ratings_at_once_of_a_cancelled_call_store_the_latest_ratings_reward(tmp_path: Path) -> None:
    """A cancelled call has no reward until a rating gives it one (in the rating's commit). Two ratings at once:
    the stored reward is the one the latest rating answered, whichever rater finishes last, so an instance
    reading the log later learns the latest rating from the reward that includes it."""
    feedback, _, execution_id, latest, earlier = await rated_at_once(tmp_path)
    rated = await feedback.reads.get_execution(execution_id)
    assert rated is not None and rated.reward == latest != earlier
    await feedback.aclose()


async def test_two_ratings_at_once_of_a_cancelled_call_leave_its_session_the_latest_ratings_reward(
    tmp_path: Path,
) -> None:
    """The earlier rating's rater, done last, put its reward in the session's record of the call over the
    latest's: the episode's total was the 5's reward (-1.0) where the log held the 1's (-9.0), and the end of the
    session was learned from it."""
    feedback, services, execution_id, latest, earlier = await rated_at_once(tmp_path)
    session = services.learning.sessions.get("s")
    call = session.find(execution_id)
    assert call is not None and call.reward == latest != earlier
    episode = await services.agent.end_session("s", "success")
    assert episode.total_reward == latest
    await feedback.aclose()
