"""Exploration that follows the rewards: ε rises when rewards fall and settles when they are steady;
the drift guard fires on a tool whose rewards changed, not on a steady one; what it learned survives
a snapshot."""

from __future__ import annotations

import numpy as np

from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.exploration import Exploration, ExplorationConfig, PageHinkley

CATALOGUE = [
    ToolDoc("weather__forecast", "Weather forecast for a city: rain, temperature, wind"),
    ToolDoc("weather__now", "Current weather conditions in a city"),
    ToolDoc("flights__search", "Search flights between two airports on a date"),
]


def test_the_drift_guard_is_quiet_on_steady_rewards_and_fires_soon_after_a_change() -> None:
    rng = np.random.default_rng(0)
    config = ExplorationConfig()
    alarms = 0
    for _ in range(50):
        detector = PageHinkley()
        for _ in range(1000):  # a tool that works 60% of the time, for 50,000 calls
            alarms += (
                detector.update(float(rng.random() < 0.6), config.delta, config.threshold, config.min_calls) is not None
            )
    assert alarms <= 2  # measured: about one false alarm per 50,000 calls of a steady tool
    delays = []
    for _ in range(50):
        detector = PageHinkley()
        for _ in range(300):
            detector.update(float(rng.random() < 0.9), config.delta, config.threshold, config.min_calls)
        for call in range(1, 200):  # it breaks: 10% success
            if detector.update(float(rng.random() < 0.1), config.delta, config.threshold, config.min_calls):
                delays.append(call)
                break
    assert len(delays) == 50 and np.median(delays) <= 20


def test_epsilon_rises_when_rewards_fall_and_settles_when_they_are_steady() -> None:
    exploration = Exploration(ExplorationConfig(epsilon_min=0.01, epsilon_max=0.2))
    for call in range(3000):
        exploration.observe(f"tool{call % 5}", 0.9, True, call)
    steady = exploration.epsilon
    assert steady < 0.02 and "steady at 100%" in exploration.reason
    for call in range(3000, 3150):
        exploration.observe(f"tool{call % 5}", 0.2, False, call)
    assert exploration.epsilon > 0.15 and "success fell from 9" in exploration.reason
    for call in range(3150, 9000):
        exploration.observe(f"tool{call % 5}", 0.2, False, call)
    assert exploration.epsilon < 0.05  # the new level is the norm now


def test_a_tool_that_breaks_is_forgotten_and_reopened_and_the_state_round_trips() -> None:
    learner, rng = Learner(LearnerConfig(), CATALOGUE), np.random.default_rng(1)
    query = "will it rain in Oslo tomorrow"
    for _ in range(60):
        learner.learn(Step("weather__forecast", True, 100.0, query=query), rng)
    assert learner.recommend(query, rng).chosen == "weather__forecast"
    for _ in range(30):  # the forecast server broke
        learner.learn(Step("weather__forecast", False, 100.0, query=query), rng)
    drifts = learner.exploration.drifts
    assert [(d.tool, d.direction) for d in drifts] == [("weather__forecast", "fell")]
    assert "weather__forecast" in learner.exploration.open_tools()
    picks = []
    for _ in range(150):  # toolwise picks now: the forecast keeps failing, the current conditions work
        chosen = learner.recommend(query, rng, top_k=1).chosen
        picks.append(chosen)
        learner.learn(Step(chosen, chosen == "weather__now", 100.0, query=query), rng)
    assert "weather__now" in picks[:60]  # exploration found it
    assert picks[-30:].count("weather__now") >= 24
    copy = Learner(LearnerConfig(), CATALOGUE)
    copy.load_state(learner.state_dict())
    assert copy.exploration.drifts == drifts and copy.exploration.reason == learner.exploration.reason


def test_an_explored_pick_carries_the_mixtures_propensity() -> None:
    config = LearnerConfig(exploration=ExplorationConfig(epsilon_min=0.5, epsilon_max=0.5))
    learner, rng = Learner(config, CATALOGUE), np.random.default_rng(2)
    seen = {}
    for _ in range(200):
        decision = learner.recommend("flights to Rome", rng, top_k=3)
        seen[decision.chosen] = decision.propensity
    greedy = max(seen, key=lambda t: seen[t])
    assert abs(seen[greedy] - (0.5 + 0.5 / 3)) < 1e-9
    assert all(abs(p - 0.5 / 3) < 1e-9 for t, p in seen.items() if t != greedy)


def test_the_reason_counts_the_calls_so_far_before_the_recent_window_fills() -> None:
    exploration = Exploration(ExplorationConfig())
    exploration.observe("a", 1.0, True, 0)
    exploration.observe("a", 0.0, False, 1)
    assert exploration.reason.startswith("success steady at 50% over the 2 calls so far: ε")
    for call in range(2, 2 + exploration.config.short):
        exploration.observe("a", 1.0, True, call)
    assert f"over the last ~{exploration.config.short} calls" in exploration.reason
