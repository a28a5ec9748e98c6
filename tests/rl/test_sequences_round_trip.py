"""get_successful_sequences lists the same sequences in the same order before and after a snapshot is saved
and loaded (a restart): sequences that tie keep one order, not the order their n-grams were stored in."""

from __future__ import annotations

import numpy as np

from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.state import pack, unpack

TOOLS = [ToolDoc(f"t{i}", f"tool number {i} does thing {i}") for i in range(6)]


def test_the_top_sequences_keep_their_order_across_a_snapshot() -> None:
    learner, rng = Learner(LearnerConfig(), TOOLS), np.random.default_rng(0)
    history: list[str] = []
    failed = False
    for _ in range(400):
        if rng.random() < 0.1:
            history, failed = [], False
        tool, works = f"t{int(rng.integers(6))}", bool(rng.random() < 0.6)
        previous = history[-1] if history else None
        step = Step(tool, works, 10.0, "do thing", previous, len(history), tuple(history[-2:]), after_failure=failed)
        learner.learn(step, rng)
        history.append(tool)
        failed = not works
    copy = Learner(LearnerConfig(), [])
    copy.load_state(unpack(pack(learner.state_dict())))
    before, after = learner.sequences.top_sequences(None, 100), copy.sequences.top_sequences(None, 100)
    assert len(before) > 20 and [(r.prefix, r.tool) for r in after] == [(r.prefix, r.tool) for r in before]
