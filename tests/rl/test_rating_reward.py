"""A rating changes a call's reward by what the rating says and nothing else: (r − 3) × rating_per_point
over the reward the call had (its speed bonus as judged when it was made, not against the tool's mean
latency at the time of the rating: a rating of 3 took a fast call's bonus away, a 4 lowered its reward)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc

TOOLS = [ToolDoc("files__read", "Read a file")]


@pytest.mark.parametrize(("rating", "change"), [(3, 0.0), (4, 2.0), (1, -4.0)])
def test_a_rating_moves_the_reward_by_its_points_whatever_the_tools_latency_since(rating: int, change: float) -> None:
    learner, rng = Learner(LearnerConfig(), TOOLS), np.random.default_rng(0)
    for _ in range(5):
        learner.learn(Step("files__read", True, 1000.0, "read notes"), rng)
    call = Step("files__read", True, 100.0, "read notes")
    made = learner.learn(call, rng).reward  # fast: under 0.8 × the tool's mean latency then
    for _ in range(100):  # the tool got faster since: 100 ms is no longer fast
        learner.learn(Step("files__read", True, 10.0, "read notes"), rng)
    rated = learner.observe_rating(replace(call, rating=rating), rng, made).reward
    again = learner.observe_rating(replace(call, rating=3), rng, rated, rating).reward  # re-rated 3
    assert rated == pytest.approx(made + change) and again == pytest.approx(made)
