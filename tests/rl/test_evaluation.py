"""Off-policy evaluation (rl/evaluation.py): the estimators are unbiased on a simulation whose truth is
known, a frozen candidate replayed through the learner is estimated within its interval, and a log
that cannot support the candidate is refused with its numbers."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from toolwise.errors import UserError
from toolwise.rl import LearnerConfig, Step, ToolDoc
from toolwise.rl.estimators import ThinSupportError, estimate
from toolwise.rl.evaluation import (
    Candidate,
    Logged,
    OffPolicyReplay,
    SupportRule,
    candidate_learner,
)
from toolwise.rl.policies import LinUCBConfig, OutcomeModelConfig, UCBConfig

TOOLS = [
    ToolDoc("weather_forecast", "Weather forecast for a city: rain, temperature, wind."),
    ToolDoc("stock_quote", "Stock price quote for a ticker symbol on the market."),
    ToolDoc("send_email", "Send an email message to a recipient address."),
    ToolDoc("translate_text", "Translate text between languages."),
]
QUERIES = [
    ("will it rain in Paris tomorrow", "weather_forecast"),
    ("temperature and wind in Oslo", "weather_forecast"),
    ("price of the AAPL ticker", "stock_quote"),
    ("market quote for MSFT stock", "stock_quote"),
    ("email my boss the report", "send_email"),
    ("send a message to alice", "send_email"),
    ("translate hello into German", "translate_text"),
    ("what is this sentence in Spanish", "translate_text"),
]
SUCCESS, FAILURE = 10.0, -5.0


def test_ips_snips_and_dr_intervals_cover_a_known_candidates_value() -> None:
    """Contexts x in 0..3, ε-greedy logging (ε = 0.3, greedy on the wrong arm half the time), a fixed
    candidate; its true value is exact. Over 40 seeds each interval covers it about 95% of the time."""
    means = np.array([[1.0, 5.0, 2.0], [4.0, 0.0, 1.0], [0.0, 2.0, 6.0], [3.0, 3.0, 0.0]])
    candidate = np.array([1, 0, 2, 0])
    logging_greedy = np.array([0, 0, 1, 2])
    truth = float(means[np.arange(4), candidate].mean())
    covered = {"ips": 0, "snips": 0, "dr": 0}
    dr_model = means + 1.5  # a biased reward model: DR must stay unbiased through the correction
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n, eps = 2000, 0.3
        x = rng.integers(4, size=n)
        explore = rng.random(n) < eps
        actions = np.where(explore, rng.integers(3, size=n), logging_greedy[x])
        propensity = eps / 3 + (1 - eps) * (actions == logging_greedy[x])
        rewards = means[x, actions] + rng.normal(0, 2.0, size=n)
        matched = (actions == candidate[x]).astype(float)
        found = estimate(rewards, propensity, matched, dr_model[x, actions], dr_model[x, candidate[x]])
        for name in covered:
            interval = getattr(found, name)
            covered[name] += interval.low <= truth <= interval.high
        assert not found.logged.low <= truth <= found.logged.high  # the naive mean is another policy's
    assert all(count >= 34 for count in covered.values()), covered  # nominal 38 of 40


def _log(rng: np.random.Generator, n: int, *, uniform: bool) -> list[tuple[Logged, str]]:
    """Decisions over QUERIES: uniform logging (propensity 1/4), or always the first tool (propensity 1).
    A call succeeds with probability 0.9 with the right tool, 0.1 with another."""
    names = [t.name for t in TOOLS]
    rows = []
    for _ in range(n):
        query, right = QUERIES[int(rng.integers(len(QUERIES)))]
        tool = names[int(rng.integers(4))] if uniform else names[0]
        success = bool(rng.random() < (0.9 if tool == right else 0.1))
        reward = (SUCCESS if success else FAILURE) - 0.1 * 0.5
        rows.append((Logged(Step(tool, success, 500.0, query=query), reward, 0.25 if uniform else 1.0, True), right))
    return rows


def _true_value(replay: OffPolicyReplay, draws: int = 200) -> float:
    """The frozen candidate's expected reward over the query distribution, by asking a copy of it."""
    learner, rng = copy.deepcopy(replay.learner), np.random.default_rng(99)
    total = 0.0
    for query, right in QUERIES:
        for _ in range(draws):
            chosen = learner.recommend(query, rng, top_k=1).chosen
            p = 0.9 if chosen == right else 0.1
            total += p * SUCCESS + (1 - p) * FAILURE - 0.05
    return total / (len(QUERIES) * draws)


@pytest.mark.parametrize("policy", ["linucb", "semantic"])
def test_a_frozen_candidate_replayed_through_the_learner_is_estimated_within_its_interval(policy: str) -> None:
    rng = np.random.default_rng(3)
    candidate = Candidate(policy, epsilon=0.1, learning=False)
    replay = OffPolicyReplay(candidate_learner(candidate, LearnerConfig(), TOOLS, None), candidate, rng)
    for logged, _ in _log(rng, 300, uniform=True):
        replay.warm(logged)
    truth = _true_value(replay)
    for logged, _ in _log(rng, 1500, uniform=True):
        replay.step(logged)
    found = replay.result()
    e = found.estimates
    assert e.n == 1500 and found.counts.warm_up == 300
    for interval in (e.ips, e.snips, e.dr):
        assert interval.low <= truth <= interval.high, (interval, truth)
    assert truth > e.logged.high  # better than logging uniformly, and the estimates say so
    assert e.dr.stderr < e.ips.stderr  # the reward model takes variance out


def test_a_learning_candidate_learns_only_from_the_decisions_it_would_have_made() -> None:
    rng = np.random.default_rng(5)
    candidate = Candidate("linucb", epsilon=0.1)
    replay = OffPolicyReplay(candidate_learner(candidate, LearnerConfig(), TOOLS, None), candidate, rng)
    for logged, _ in _log(rng, 1200, uniform=True):
        replay.step(logged)
    found = replay.result()
    assert replay.learner.updates == found.estimates.matches  # one update per matched decision
    assert found.estimates.snips.estimate > found.estimates.logged.high


def test_a_log_without_support_for_the_candidate_is_refused_naming_the_numbers() -> None:
    rng = np.random.default_rng(0)
    candidate = Candidate("linucb", epsilon=0.0, learning=False)
    replay = OffPolicyReplay(candidate_learner(candidate, LearnerConfig(), TOOLS, None), candidate, rng)
    for logged, _ in _log(rng, 200, uniform=True):
        replay.warm(logged)
    for logged, _ in _log(rng, 80, uniform=False):  # the logging policy only ever called the first tool
        replay.step(logged)
    with pytest.raises(ThinSupportError) as refused:
        replay.result()
    message = str(refused.value)
    assert "picked the logged tool in " in message and " of 80 logged decisions (need ≥ 30)" in message
    assert "80 decisions logged: 80 evaluated" in message
    unsupported = replay.counts.unsupported  # where the candidate departed from the certain logged choice
    assert unsupported > 40 and f"in {unsupported} of 80 logged decisions the candidate picked a tool" in message


def test_decisions_without_propensities_are_counted_and_refused() -> None:
    candidate = Candidate("ucb")
    rng = np.random.default_rng(0)
    replay = OffPolicyReplay(candidate_learner(candidate, LearnerConfig(), TOOLS, None), candidate, rng, SupportRule())
    replay.step(Logged(Step("send_email", True, 100.0, query="email alice"), 9.9, None, True))
    replay.step(Logged(Step("send_email", True, 100.0, query="email bob"), 9.9, 1e-5, True))
    with pytest.raises(ThinSupportError, match="2 followed a recommendation, 1 of them without a propensity, 1 with"):
        replay.result()


def test_a_setting_the_candidate_policy_lacks_is_refused() -> None:
    with pytest.raises(UserError, match="policy 'thompson' has no ε to set"):
        Candidate("thompson", epsilon=0.1)
    with pytest.raises(UserError, match="policy must be one of"):
        Candidate("greedy")


def test_the_default_policy_can_be_evaluated_at_an_epsilon_of_its_own() -> None:
    """`evaluate_policy(policy="outcome", epsilon=0.05)`: the outcome policy explores as its choice model does."""
    config = Candidate("outcome", epsilon=0.05).policy_config()
    assert isinstance(config, OutcomeModelConfig) and config.choice.epsilon == 0.05


def test_a_setting_is_set_where_the_policy_keeps_it() -> None:
    """ε, and the prior weight, reach the config that holds them (the outcome policy's choice model, a
    linear policy's ridge), and ucb's decaying ε is held at the value asked for."""
    linucb = Candidate("linucb", prior_weight=0.3).policy_config()
    assert isinstance(linucb, LinUCBConfig) and linucb.ridge.prior_weight == 0.3
    ucb = Candidate("ucb", epsilon=0.2).policy_config()
    assert isinstance(ucb, UCBConfig) and (ucb.epsilon, ucb.epsilon_min) == (0.2, 0.2)
