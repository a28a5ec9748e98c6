"""A failed call of a request that came on no connection (its own one-request session: stateless HTTP, the
Inspector CLI) has no next call to be read from (rl/hindsight.py): live it is learned at once as its
session's end; replayed from the log (a restart's catch-up, another instance's calls) it must be too, not
left waiting for a call that never comes, crowding out the failures of real conversations."""

from __future__ import annotations

import numpy as np

from toolwise.feedback.records import REQUEST_PREFIX, CallColumns, new_id
from toolwise.learning.sessions import step_columns
from toolwise.rl import Learner, LearnerConfig, ToolDoc

TOOLS = [ToolDoc("git__git_status", "Shows the working tree status"), ToolDoc("git__git_log", "Shows the commits")]


def test_a_replayed_failure_of_a_one_request_session_waits_for_no_next_call() -> None:
    # as `Sessions.resolve` names them; `client/request-7` is a conversation the client named so
    sessions = [f"client/{REQUEST_PREFIX}{new_id()}" for _ in range(3)] + ["client/request-7"]
    batch = CallColumns(
        seq=[1, 2, 3, 4],
        session_id=sessions,
        position=[0, 0, 0, 0],
        tool=["git__git_status"] * 4,
        success=[False] * 4,
        latency_ms=[10.0] * 4,
        query=["what changed"] * 4,
        previous_tool=[None] * 4,
        error_type=["ToolError"] * 4,
    )
    rows = list(range(4))
    steps = step_columns(batch, rows, [()] * 4, batch.query, 3)
    learner = Learner(LearnerConfig(), TOOLS)
    learner.learn_many(steps, np.random.default_rng(0))
    assert list(learner.waiting) == ["client/request-7"]  # only the conversation has a next call to come
