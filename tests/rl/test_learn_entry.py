"""The server's one entry into rl per step (`Learner.learn`) returns what the server records; without
`update` it only computes; `end_episode` drops the future term of a TD learner's last step and teaches
a bandit nothing."""

from __future__ import annotations

import numpy as np

from tests.rl.test_learner import TOOLS, log
from toolwise.rl import Learner, LearnerConfig


def test_learn_returns_the_reward_and_context_it_learned_with() -> None:
    for policy in ("semantic", "ucb", "choice"):
        learner, twin = Learner(LearnerConfig(policy=policy), TOOLS), Learner(LearnerConfig(policy=policy), TOOLS)
        rng = np.random.default_rng(3)
        for step in log(3, 60):
            expected = (learner.reward_of(step), learner.encode(step.query, step.previous_tool, step.position).hash)
            learned = learner.learn(step, rng)
            assert (learned.reward, learned.context_hash) == expected
        assert learner.updates == 60
        given = twin.learn(log(3, 1)[0], rng, reward=-5.0)  # a reward given is learned as it is
        assert given.reward == -5.0 and twin.reward_sum == -5.0


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
