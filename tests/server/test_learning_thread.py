"""Learning happens beside the event loop: every learning step of a proxied call runs on the learning
thread, in call order, and what it learned is what the recommendations after it read."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.server.surface import ok, running
from toolwise.rl import Step


async def test_proxied_calls_are_learned_on_the_learning_thread_in_call_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(tmp_path) as (app, client):
        learner = app.learning.learner
        learn = learner.learn
        seen: list[tuple[str, int]] = []

        def spy(step: Step, *args: Any, **kwargs: Any) -> Any:
            seen.append((str((step.query, step.position)), threading.get_ident()))
            return learn(step, *args, **kwargs)

        monkeypatch.setattr(learner, "learn", spy)
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        for i in range(10):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        await app.learning.drain()
        loop_thread = threading.get_ident()
        assert len(seen) == 10
        assert all(thread != loop_thread for _, thread in seen), "no learning step ran on the event loop"
        assert [position for position, _ in seen] == [str(("say hello back", i)) for i in range(10)]
        stats = ok(await client.call_tool("get_learning_stats", {}))
        assert stats["updates"] == 10 and stats["calls"] == 10
