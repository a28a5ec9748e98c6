"""Sessions a client names and never ends (an agent framework's conversations on a stdio connection,
which never closes) do not grow toolwise without bound: the least recently used are forgotten, their
calls stay recorded. In-process against a real SQLite file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.server.test_persistence import proxied, service
from toolwise.learning import sessions


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_conversations_never_ended_are_forgotten_least_recently_used_first(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sessions, "OPEN_SESSIONS", 50, raising=False)
    feedback, services = await service(url)
    proxied(services, "kept", "git__git_status")
    ids = []
    for i in range(200):
        ids.append(proxied(services, f"conversation-{i}", "git__git_log"))
        if i % 10 == 0:
            proxied(services, "kept", "git__git_diff")  # in use all along
    await services.learning.drain()
    assert len(services.learning.sessions) <= 50
    kept = services.learning.sessions.find("kept")
    assert kept is not None and kept.length == 21  # a session in use keeps its calls
    assert services.learning.sessions.find("conversation-0") is None
    assert await feedback.reads.get_execution(ids[0]) is not None  # a forgotten session's calls stay recorded
    await feedback.aclose()
