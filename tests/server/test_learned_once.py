"""A rating or a session's end is learned exactly once and stays learned, whatever happens while it is
on its way: a snapshot taken, a sync, a restore followed, the database failing, the caller going away.
In process against a real SQLite file: the services as the server runs them, without the MCP surface."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_growth import proxied
from tests.server.test_persistence import service
from toolwise.feedback import Execution, FeedbackService
from toolwise.learning import agent
from toolwise.server.services import Services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def rated_with(
    services: Services, monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], Awaitable[object]]
) -> int:
    """Rate a call, `meanwhile` running once the rating is committed and before it is learned (while its
    call's query is read); returns how many learning updates the rating and `meanwhile` added."""
    session = services.learning.sessions.get("s")
    execution_id = proxied(services, "s", "git__git_log")
    await services.learning.drain()
    before = services.learning.learner.updates
    read_query = agent.with_session_query

    async def first_meanwhile(feedback: FeedbackService, execution: Execution, namespace: str) -> Execution:
        await meanwhile()
        return await read_query(feedback, execution, namespace)

    monkeypatch.setattr(agent, "with_session_query", first_meanwhile)
    await services.agent.rate(session, 1, execution_id, None, None)
    return services.learning.learner.updates - before


async def test_a_rating_on_its_way_when_a_snapshot_is_taken_is_learned_after_a_restart_from_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, live = await service(url)
    assert await rated_with(live, monkeypatch, lambda: live.snapshots.save("periodic")) == 1
    learned = live.learning.learner.updates
    await feedback.aclose()  # a crash: the periodic snapshot is the newest

    feedback, restarted = await service(url)
    report = await restarted.snapshots.restore_latest()
    assert restarted.learning.learner.updates == learned, report  # the rating was not lost
    await feedback.aclose()


async def test_a_rating_a_sync_learns_on_its_way_is_not_learned_again(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(url)

    async def sync() -> Any:
        await feedback.flush()
        return await services.sharing.sync()

    assert await rated_with(services, monkeypatch, sync) == 1
    assert await services.sharing.sync() == 0
    await feedback.aclose()


async def test_a_rating_on_its_way_when_another_process_s_restore_is_followed_is_learned_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(url)
    other_feedback, other = await service(url)
    await other.snapshots.adopt(await other.snapshots.save("manual"), "restore")  # as `toolwise snapshot restore`
    restored: list[int] = []

    async def follow() -> None:
        await services.snapshots.follow_restores()
        restored.append(services.learning.learner.updates)

    await rated_with(services, monkeypatch, follow)
    await services.sharing.sync()
    # the restored state had learned neither the call nor its rating: the sync learns the call, the rating once
    assert services.learning.learner.updates == restored[0] + 2
    await feedback.aclose()
    await other_feedback.aclose()
