"""The server's one entry into rl per step (`Learner.learn`) learns exactly what `observe` learns and
returns what the server records; without `update` it only computes; `end_episode` drops the future
term of a TD learner's last step and teaches a bandit nothing."""

from __future__ import annotations

import numpy as np

from tests.rl.test_learner import TOOLS, log
from toolwise.rl import Learner, LearnerConfig


def test_learn_returns_the_reward_and_context_it_learned_with_and_learns_as_observe_does() -> None:
    for policy in ("semantic", "ucb"):
        by_observe, by_learn = (
            Learner(LearnerConfig(policy=policy), TOOLS),
            Learner(LearnerConfig(policy=policy), TOOLS),
        )
        rng_a, rng_b = np.random.default_rng(3), np.random.default_rng(3)
        for step in log(3, 60):
            expected = (
                by_observe.reward_of(step),
                by_observe.encode(step.query, step.previous_tool, step.position),
            )
            by_observe.observe(step, rng_a)
            learned = by_learn.learn(step, rng_b)
            assert (learned.reward, learned.context_hash) == (expected[0], expected[1].hash)
        decisions = [learner.recommend("what changed", np.random.default_rng(9)) for learner in (by_observe, by_learn)]
        assert [r.tool for r in decisions[0].ranked] == [r.tool for r in decisions[1].ranked]
        assert by_learn.updates == by_observe.updates == 60


def test_learn_without_update_only_computes() -> None:
    learner = Learner(LearnerConfig(), TOOLS)
    step = log(1, 1)[0]
    learned = learner.learn(step, np.random.default_rng(0), update=False)
    assert learned.reward == learner.reward_of(step) and learner.updates == 0 and not learner.sequences.table


def test_end_episode_learns_a_terminal_transition_only_for_a_td_learner() -> None:
    step = log(2, 1)[0]
    bandit, td = Learner(LearnerConfig(policy="semantic"), TOOLS), Learner(LearnerConfig(policy="ucb"), TOOLS)
    for learner in (bandit, td):
        learner.learn(step, np.random.default_rng(0))
    assert bandit.end_episode(step, 10.0, np.random.default_rng(0)) is None and bandit.updates == 1
    assert td.end_episode(step, 10.0, np.random.default_rng(0)) is not None and td.updates == 2
    first = td.replay.items[0]
    assert first is not None
    assert [t.next_context for t in td.replay.items if t is not None] == [
        first.next_context,  # the first learning bootstrapped from the next context
        -1,  # the end: no future term
    ]
