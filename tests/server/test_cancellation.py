"""A request cancelled half-way (a client timeout, a user's stop) leaves nothing half-done."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.server.test_growth import proxied
from tests.server.test_persistence import service
from toolwise.feedback.records import RatingEvent


async def test_a_rating_cancelled_once_committed_is_still_learned_and_its_reward_stored(tmp_path: Path) -> None:
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}")
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log")
    await services.learning.drain()
    before = (await feedback.log.get_execution(execution_id)).reward
    updates = services.learning.learner.updates
    original = feedback.log.add_rating

    async def add_rating(*args: object, **kwargs: object) -> RatingEvent:
        event = await original(*args, **kwargs)  # type: ignore[arg-type]  # forwarded as the caller gave them
        rating.cancel()  # the client gives up just as its rating is committed
        return event

    feedback.log.add_rating = add_rating  # type: ignore[method-assign]  # a spy in its place
    rating = asyncio.create_task(services.learning.rate(session, 1, execution_id, None, None))
    with pytest.raises(asyncio.CancelledError):
        await rating
    await asyncio.sleep(0.5)
    after = (await feedback.log.get_execution(execution_id)).reward
    assert after is not None and after < before  # the low rating's reward is stored
    assert services.learning.learner.updates > updates  # and learned
    await feedback.aclose()
