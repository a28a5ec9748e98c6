"""A request cancelled half-way (a client timeout, a user's stop) leaves nothing half-done."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.server.test_growth import proxied
from tests.server.test_persistence import service
from toolwise.feedback.records import RatingEvent


async def test_a_rating_cancelled_once_committed_is_still_learned_and_its_reward_stored(tmp_path: Path) -> None:
    feedback, learning = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    session = learning.sessions.get("s")
    execution_id = proxied(learning, "s", "git__git_log")
    await learning.drain()
    before = (await feedback.log.get_execution(execution_id)).reward
    updates = learning.learner.updates
    original = feedback.log.add_rating

    async def add_rating(*args: object, **kwargs: object) -> RatingEvent:
        event = await original(*args, **kwargs)  # type: ignore[arg-type]
        rating.cancel()  # the client gives up just as its rating is committed
        return event

    feedback.log.add_rating = add_rating  # type: ignore[method-assign]
    rating = asyncio.create_task(learning.rate(session, 1, execution_id, None, None))
    with pytest.raises(asyncio.CancelledError):
        await rating
    await asyncio.sleep(0.5)
    after = (await feedback.log.get_execution(execution_id)).reward
    assert after is not None and after < before  # the low rating's reward is stored
    assert learning.learner.updates > updates  # and learned
    await feedback.aclose()
