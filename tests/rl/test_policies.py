from __future__ import annotations

import numpy as np
import pytest

from toolwise.rl import ContextEncoder
from toolwise.rl.context import Context
from toolwise.rl.policies import POLICIES, LinUCB, TabularUCB, UCBConfig, make_policy
from toolwise.rl.policies.base import Lesson, Policy, Update
from toolwise.rl.policy_names import POLICY_NAMES
from toolwise.rl.replay import Batch

ENC = ContextEncoder()
S = ENC.encode("list files", None, 0)
S2 = ENC.encode("list files", "srv__a", 1)
ARMS = np.arange(3)
NO_PRIOR = np.zeros(3)


def teach(policy: Policy, context: Context, arm: int, reward: float, after: Context | None, prior: float) -> Update:
    """One call of `arm` in `context` with normalised `reward`, then `after` (None: the episode ended)."""
    lesson = Lesson(context, arm, reward, reward >= 0.5, prior=prior, next_context=after)
    return policy.learn_one(lesson, np.random.default_rng(0))


def test_td_update_terminal_and_with_a_future() -> None:
    p = TabularUCB(UCBConfig(learning_rate=0.1, discount=0.9))
    assert teach(p, S, 0, 1.0, None, 0.0).td_error == pytest.approx(1.0)
    assert p.expected(S, ARMS, NO_PRIOR)[0] == pytest.approx(0.1)
    teach(p, S2, 1, 0.5, None, 0.0)  # Q(S2, 1) = 0.05
    update = teach(p, S, 0, 1.0, S2, 0.0)  # TD error = 1 + 0.9 · 0.05 − 0.1
    assert update.td_error == pytest.approx(0.945)
    assert p.expected(S, ARMS, NO_PRIOR)[0] == pytest.approx(0.1 + 0.1 * 0.945)
    assert update.transition is not None and update.transition.next_context >= 0


def test_ucb_tries_untried_arms_first_then_ranks_by_q_plus_bonus() -> None:
    p = TabularUCB(UCBConfig(epsilon=0.0, epsilon_min=0.0, c=2.0))
    rng = np.random.default_rng(0)
    teach(p, S, 0, 1.0, None, 0.0)
    teach(p, S, 1, 0.0, None, 0.0)
    assert p.select(S, ARMS, NO_PRIOR, rng).chosen == 2, "the untried arm comes first"
    teach(p, S, 2, 0.0, None, 0.0)
    teach(p, S, 2, 0.0, None, 0.0)
    selection = p.select(S, ARMS, NO_PRIOR, rng)
    n, q = np.array([1, 1, 2]), np.array([0.1, 0.0, 0.0])
    expected = q * 0.1 + 2 * np.sqrt(np.log(4) / n)
    assert selection.ranked.tolist() == [0, 1, 2]
    assert selection.scores == pytest.approx(np.sort(expected)[::-1])
    assert not selection.explored and selection.propensity == pytest.approx(1.0)


def test_ucb_ties_are_broken_by_the_rng() -> None:
    chosen = {
        TabularUCB(UCBConfig(epsilon=0, epsilon_min=0)).select(S, ARMS, NO_PRIOR, np.random.default_rng(seed)).chosen
        for seed in range(30)
    }
    assert chosen == {0, 1, 2}


def test_epsilon_decays_per_selection_to_its_floor() -> None:
    p = TabularUCB(UCBConfig(epsilon=1.0, epsilon_decay=0.995, epsilon_min=0.01))
    rng = np.random.default_rng(0)
    for _ in range(100):
        p.select(S, ARMS, NO_PRIOR, rng)
    assert p.epsilon == pytest.approx(0.995**100)
    for _ in range(2_000):
        p.select(S, ARMS, NO_PRIOR, rng)
    assert p.epsilon == 0.01


def test_ucb_propensity_mixes_uniform_exploration_and_the_greedy_arm() -> None:
    p = TabularUCB(UCBConfig(epsilon=0.3, epsilon_decay=1.0, epsilon_min=0.3))
    for arm in range(3):
        teach(p, S, arm, [1.0, 0.0, 0.0][arm], None, 0.0)
    rng = np.random.default_rng(3)
    for _ in range(50):
        s = p.select(S, ARMS, NO_PRIOR, rng)
        assert s.propensity == pytest.approx(0.1 + (0.7 if s.chosen == 0 else 0.0))


def test_replayed_batch_applies_importance_weights() -> None:
    p = TabularUCB(UCBConfig(learning_rate=0.5))
    t = teach(p, S, 0, 0.0, None, 0.0).transition
    assert t is not None
    t_good = type(t)(t.context, 1, 1.0, -1)
    td = p.replay(Batch(np.array([0]), [t_good], np.array([0.5])))
    assert td.tolist() == [1.0]
    assert p.expected(S, ARMS, NO_PRIOR)[1] == pytest.approx(0.5 * 0.5 * 1.0)


def test_policy_configs_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match=r"-0\.5"):
        UCBConfig(c=-0.5)
    with pytest.raises(ValueError, match="policy must be one of"):
        make_policy("greedy")


def test_linucb_learns_which_tool_a_query_needs() -> None:
    p, rng = LinUCB(), np.random.default_rng(0)
    contexts = [ENC.encode(f"convert {tz} time", None, 0) for tz in ("utc", "tokyo", "paris")]
    for _ in range(30):
        for c in contexts:
            teach(p, c, 2, 0.8, None, 0.0)
            teach(p, c, 0, 0.2, None, 0.0)
    unseen = ENC.encode("convert berlin time", None, 0)
    assert p.select(unseen, ARMS, NO_PRIOR, rng).ranked[0] == 2, "generalises to an unseen query"


def test_the_policy_names_the_config_checks_are_the_policies_there_are() -> None:
    """`rl/policy_names.py` lists them without importing them (the config's check, the CLI's help)."""
    assert tuple(sorted(POLICIES)) == POLICY_NAMES
