"""A tool the drift guard saw break is ranked down everywhere by the policies that read health (`outcome`,
`choice`) until its calls work again; a snapshot saved and loaded (a restart, snapshot_restore) keeps that,
so the broken tool does not come back up after a restart."""

from __future__ import annotations

import numpy as np
import pytest

from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.state import pack, unpack

TOOLS = [
    ToolDoc("time__get_current_time", "Get the current time in a specific timezone"),
    ToolDoc("time__convert_time", "Convert time between timezones"),
    ToolDoc("git__git_status", "Shows the working tree status"),
]
BROKE = "time__get_current_time"


@pytest.mark.parametrize("policy", ["outcome", "choice"])
def test_a_tool_that_broke_stays_ranked_down_across_a_snapshot(policy: str) -> None:
    learner, rng = Learner(LearnerConfig(policy=policy), TOOLS), np.random.default_rng(0)
    for works in [True] * 60 + [False] * 40:  # worked for its requests, then broke
        learner.learn(Step(BROKE, works, 100.0, "what time is it in tokyo"), rng)
        learner.learn(Step("git__git_status", True, 100.0, "what changed"), rng)
    assert [(d.tool, d.direction) for d in learner.exploration.drifts] == [(BROKE, "fell")]
    copy = Learner(LearnerConfig(policy=policy), TOOLS)
    copy.load_state(unpack(pack(learner.state_dict())))
    copy.set_tools(TOOLS)
    for query in ["what time is it in tokyo", "convert time", "what changed"]:
        before, after = (
            learner.recommend(query, np.random.default_rng(1)),
            copy.recommend(query, np.random.default_rng(1)),
        )
        assert [(r.tool, r.score) for r in after.ranked] == [(r.tool, r.score) for r in before.ranked], query
