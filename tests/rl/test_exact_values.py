"""Exact values per policy, as MABWiser pins each of its policies: one fixed stream of calls through
the one interface (`learn_one`), and each policy's expected reward per arm afterwards, to 1e-9. A change
to what any policy learns fails here first, with the policy's name."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from toolwise.rl import ContextEncoder
from toolwise.rl.policies import POLICIES, make_policy
from toolwise.rl.policies.base import FEATURES, Lesson, Lessons, Policy

ENC = ContextEncoder()
QUERIES = ("list files", "show the diff", "what time is it", "commit my work")
ARMS = np.arange(4, dtype=np.int64)

EXPECTED = {
    "choice": [
        [0.9999917109682954, 1.3711802932458973e-06, 8.36505228330662e-07, 6.0813461830627965e-06],
        [1.52009683791414e-08, 0.9999837365926215, 1.0179714932525934e-05, 6.068491477464404e-06],
        [1.5079716422208657e-08, 1.1154904148340981e-07, 0.999926701062925, 7.317230831718078e-05],
        [1.8722448475935346e-07, 1.1368996763052624e-07, 8.447732209411825e-07, 0.9999988543123267],
    ],
    "lints": [
        [0.8483820825167923, 0.20595415062903133, 0.4171956962133516, 0.38508367260461585],
        [0.45559099423288774, 0.7896860513211962, 0.25765672249607474, 0.37793327512021174],
        [0.45559099423288774, 0.46911377625416223, 0.731718361384869, 0.24862799663033558],
        [0.22190289747551903, 0.4683197013974326, 0.4171956962133516, 0.7624173500389997],
    ],
    "linucb": [
        [0.8483820825167923, 0.20595415062903133, 0.4171956962133516, 0.38508367260461585],
        [0.45559099423288774, 0.7896860513211962, 0.25765672249607474, 0.37793327512021174],
        [0.45559099423288774, 0.46911377625416223, 0.731718361384869, 0.24862799663033558],
        [0.22190289747551903, 0.4683197013974326, 0.4171956962133516, 0.7624173500389997],
    ],
    "outcome": [
        [0.8898204913456462, 0.17384379061159927, 0.393233518399232, 0.2760735554563746],
        [0.39323348083845144, 0.8261562742567519, 0.2521451016827108, 0.3179356114082722],
        [0.39323348083845144, 0.5094194833328204, 0.7478548988814192, 0.17384372636644327],
        [0.11017950932557272, 0.4691626045313443, 0.393233518399232, 0.8261562100115958],
    ],
    "semantic": [
        [0.8211449509132205, 0.22924144323836207, 0.31634288551781276, 0.30257578113647554],
        [0.32641387547384065, 0.8053755991431519, 0.24743289385297385, 0.29900382226287464],
        [0.32641387547384065, 0.3312632198077129, 0.7942581993674116, 0.24514929589001594],
        [0.24784910709886257, 0.33202444734786674, 0.31634288551781276, 0.8021881378827811],
    ],
    "thompson": [
        [0.8566666666666666, 0.24333333333333332, 0.45999999999999996, 0.45999999999999996],
        [0.45999999999999996, 0.8566666666666666, 0.24333333333333332, 0.45999999999999996],
        [0.45999999999999996, 0.45999999999999996, 0.8566666666666666, 0.24333333333333332],
        [0.24333333333333332, 0.45999999999999996, 0.45999999999999996, 0.8566666666666666],
    ],
    "ucb": [
        [0.4181259870529175, 0.13424836099147797, 0.0, 0.0],
        [0.0, 0.4019617736339569, 0.16517573595046997, 0.0],
        [0.0, 0.0, 0.42831259965896606, 0.1541295051574707],
        [0.13337378203868866, 0.0, 0.0, 0.4373747706413269],
    ],
}


def inputs(policy: Policy, q: int) -> NDArray[np.float64]:
    """What the policy reads of the four arms for query q: the right arm (q) scores highest."""
    if policy.capabilities.candidates:
        rows = np.zeros((4, len(FEATURES)))
        rows[:, 0] = [0.9 if a == q else 0.1 * a for a in range(4)]
        rows[:, 1] = [0.5 if a == (q + 1) % 4 else 0.0 for a in range(4)]
        return rows
    return np.array([0.8 if a == q else 0.2 for a in range(4)])


def learned(name: str) -> Policy:
    """40 calls: each query's right arm, then its neighbour, alternately; every third ends an episode."""
    policy = make_policy(name)
    rng = np.random.default_rng(7)
    for i in range(40):
        q = i % 4
        arm = (q + (i // 4) % 2) % 4
        given = inputs(policy, q)
        lesson = Lesson(
            ENC.encode(QUERIES[q], None, 0),
            arm,
            0.9 if arm == q else 0.2,
            arm == q,
            weight=0.75,
            prior=float(given[arm]) if given.ndim == 1 else 0.0,
            next_context=ENC.encode(QUERIES[(q + 1) % 4], None, 1) if i % 3 else None,
            candidates=ARMS,
            rows=given if given.ndim == 2 else None,
            fit=float(arm == q),
        )
        policy.learn_one(lesson, rng)
    return policy


def test_every_policy_is_pinned() -> None:
    assert sorted(EXPECTED) == sorted(POLICIES)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_fixed_stream_learns_the_same_values(name: str) -> None:
    policy = learned(name)
    for q in range(4):
        values = policy.expected(ENC.encode(QUERIES[q], None, 0), ARMS, inputs(policy, q))
        assert values.tolist() == pytest.approx(EXPECTED[name][q], rel=1e-9, abs=1e-12), (name, QUERIES[q])
        assert int(np.argmax(values)) == q, f"{name} learned that query {q}'s right arm is best"


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_what_a_policy_does_not_declare_it_refuses_or_leaves_alone(name: str) -> None:
    policy = learned(name)
    if not policy.capabilities.learn_many:
        empty = Lessons(
            [], np.zeros(0, np.int64), ARMS[:0], np.zeros(0), np.zeros(0, bool), np.zeros(0), np.zeros(0), []
        )
        with pytest.raises(NotImplementedError, match="one call at a time"):
            policy.learn_many(empty, np.random.default_rng(0))
    if not policy.capabilities.health:
        before = policy.expected(ENC.encode(QUERIES[0], None, 0), ARMS, inputs(policy, 0))
        policy.set_health(0, 0.1)
        after = policy.expected(ENC.encode(QUERIES[0], None, 0), ARMS, inputs(policy, 0))
        assert after.tolist() == before.tolist()
    else:
        before = policy.expected(ENC.encode(QUERIES[0], None, 0), ARMS, inputs(policy, 0))
        policy.set_health(0, 0.1)
        after = policy.expected(ENC.encode(QUERIES[0], None, 0), ARMS, inputs(policy, 0))
        assert after[0] < before[0] and (after[1:] >= before[1:]).all(), "a tool that broke lately is ranked down"


@pytest.mark.parametrize("name", sorted(n for n in POLICIES if make_policy(n).capabilities.candidates))
def test_a_call_of_a_tool_outside_its_candidates_is_refused_naming_it(name: str) -> None:
    policy = make_policy(name)
    lesson = Lesson(ENC.encode(QUERIES[0], None, 0), 7, 0.9, True, candidates=ARMS, rows=inputs(policy, 0), fit=1.0)
    with pytest.raises(ValueError, match="the called arm 7 is not among the candidates"):
        policy.learn_one(lesson, np.random.default_rng(0))
