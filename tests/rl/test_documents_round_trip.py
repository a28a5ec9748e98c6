"""What the prior scores a request against is every tool's document, those that left the catalogue too
(BM25's statistics are over them all): a snapshot saved and loaded (a restart) ranks as the learner that
saved it did, after a tool left the catalogue."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rl.test_fit import FILES, SERVED
from toolwise.learning.embedding import load_embedder
from toolwise.rl import Learner, LearnerConfig, Step
from toolwise.rl.embedding import Embedder
from toolwise.rl.state import pack, unpack


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder("wordllama")
    assert loaded is not None
    return loaded


def test_a_snapshot_taken_after_a_tool_left_the_catalogue_ranks_as_before(embedder: Embedder) -> None:
    learner, rng = Learner(LearnerConfig(), FILES, embedder), np.random.default_rng(0)
    for tool, queries in SERVED.items():
        learner.learn(Step(tool, True, 100.0, query=queries[0]), rng)
    listed = FILES[1:]  # the first file tool left its server's catalogue
    learner.set_tools(listed)
    copy = Learner(LearnerConfig(), [], embedder)
    copy.load_state(unpack(pack(learner.state_dict())))
    copy.set_tools(listed)  # the running catalogue, as a restart gives it
    for queries in SERVED.values():
        before, after = (
            learner.recommend(queries[1], np.random.default_rng(1)),
            copy.recommend(queries[1], np.random.default_rng(1)),
        )
        assert [(r.tool, r.score) for r in after.ranked] == [(r.tool, r.score) for r in before.ranked], queries[1]
