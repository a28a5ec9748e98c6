"""A call that can be neither learned nor rewarded (a malformed step) is still recorded, and the calls
after it are recorded and learned: one bad call never stops the log from growing."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.server.surface import ok, rows, running
from tests.server.test_learning_thread import caught_up
from toolwise.learning import service
from toolwise.rl import Step

POISON = 2  # the session's third call: its learning and its reward both raise


@pytest.mark.parametrize("seed", [0, None], ids=["one-at-a-time", "as-runs"])
async def test_a_call_whose_learning_and_reward_both_fail_is_recorded_and_the_calls_after_it_are_learned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, seed: int | None
) -> None:
    monkeypatch.setattr(service, "IDLE_DRAIN_S", 3600.0)  # the calls queue until the drain below
    calls = service.RUNS_FROM * 2  # enough to be learned as runs without a seed
    async with running(tmp_path, seed=seed) as (app, client):
        await caught_up(app)
        learner = app.learning.learner
        learn, learn_many, reward_of = learner.learn, learner.learn_many, learner.reward_of

        def poisoned(step: Step) -> None:
            if step.position == POISON:
                raise ValueError("malformed step")

        def bad_learn(step: Step, *args: Any, **kwargs: Any) -> Any:
            poisoned(step)
            return learn(step, *args, **kwargs)

        def bad_learn_many(steps: Any, *args: Any, **kwargs: Any) -> Any:
            if POISON in list(steps.position):
                raise ValueError("malformed run")
            return learn_many(steps, *args, **kwargs)

        def bad_reward_of(step: Step) -> float:
            poisoned(step)
            return reward_of(step)

        monkeypatch.setattr(learner, "learn", bad_learn)
        monkeypatch.setattr(learner, "learn_many", bad_learn_many)
        monkeypatch.setattr(learner, "reward_of", bad_reward_of)
        for i in range(calls):
            assert not (await client.call_tool("toy__echo", {"text": f"hello {i}"})).is_error
        with caplog.at_level(logging.ERROR, logger=service.__name__):
            await app.learning.drain()
        assert app.learning.pending == 0, "the drain stopped at the bad call"
        unlearnable = [r for r in caplog.records if "could not be learned nor rewarded" in r.getMessage()]
        assert len(unlearnable) == 1 and unlearnable[0].exc_info is not None
        assert not (await client.call_tool("toy__echo", {"text": "after"})).is_error
        await app.learning.drain()
        stats = ok(await client.call_tool("get_learning_stats", {}))
        assert stats["calls"] == calls + 1
    recorded = rows(tmp_path, "SELECT position, reward, context_hash FROM executions ORDER BY position")
    assert [position for position, _, _ in recorded] == list(range(calls + 1))
    assert recorded[POISON][1:] == (None, None), "the bad call is recorded with what is known of it"
    others = [row for row in recorded if row[0] != POISON]
    assert all(reward is not None and len(context) == 64 for _, reward, context in others)
