"""The confidence the outcome policy reports (`p_works`): its P(works) read with a second map of p_agent and the
query–tool cosine (slope ≥ 0.5), where the verdicts' map holds the slope at 1, and only where P(works) is ≥ ½.
Exact values of that map; what a user sees of it; a state saved before it still loads. Real embedding model."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pytest

from tests.rl.test_outcome import CATALOGUE
from toolwise.learning.embedding import load_embedder
from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.calibration import Calibration
from toolwise.rl.embedding import Embedder
from toolwise.rl.policies import OutcomeModel
from toolwise.rl.policies.choice_config import ChoiceConfig
from toolwise.rl.policies.outcome import OutcomeModelConfig

REQUESTS = {
    "get_weather": ["weather in Paris", "forecast for Rome tomorrow", "is it raining in Oslo", "temperature in Lima"],
    "send_email": ["email Bob the report", "send a mail to Alice", "write to my boss", "mail the invoice to Carl"],
    "convert_currency": ["convert 250 dollars into euros", "how many yen is 40 pounds", "turn 80 CAD into USD"],
    "search_web": ["search the web for pasta recipes", "find pages about tides", "look up the history of Rome"],
}
WORKS = 0.6  # every call in `habitual` works this often, whichever tool the agent called
NEW = "what is the weather like in Berlin"  # a request with no evidence


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder("wordllama")
    assert loaded is not None
    return loaded


def a_stream(seed: int, n: int) -> tuple[list[float], list[float], list[float]]:
    """(p_agent, fit, cosine) of n calls: the calls work more often the higher the cosine, whatever p_agent."""
    rng = np.random.default_rng(seed)
    p, cosine = rng.uniform(0.05, 0.99, n), rng.uniform(0.1, 0.8, n)
    fit = (rng.random(n) < 0.3 + 0.6 * cosine).astype(np.float64)
    return p.tolist(), fit.tolist(), cosine.tolist()


def test_the_map_with_the_cosine_learns_the_pinned_weights() -> None:
    """Platt scaling on (1, logit p_agent, cosine) by AdaGrad at rate 0.05, the slope held ≥ 0.5, a rating's
    revision a step with the label's change: pinned on a fixed stream, to 1e-12."""
    calibration = Calibration(0.05, min_slope=0.5, start=20.0, cosine=True)
    calibration.learn_many(*a_stream(0, 200))
    assert calibration.seen == 200
    np.testing.assert_allclose(
        calibration.weights, [0.012269506916896569, 0.5420692408871118, 0.11448982234219132], rtol=1e-12
    )
    calibration.revise(0.9, -1.0, 0.7)
    np.testing.assert_allclose(
        calibration.weights, [0.005885074092870738, 0.5341329845694666, 0.10591051001167373], rtol=1e-12
    )
    means = calibration.mean(np.array([0.2, 0.9]), np.array([0.3, 0.7]))
    np.testing.assert_allclose(means, [0.34653645777378217, 0.7526618544714442], rtol=1e-12)


def test_where_outcomes_follow_the_cosine_and_not_p_agent_the_slope_stops_at_its_floor() -> None:
    held, free = (Calibration(0.05, min_slope=s, start=20.0, cosine=True) for s in (0.5, 0.0))
    for calibration in (held, free):
        calibration.learn_many(*a_stream(0, 2_000))
    assert free.weights[1] < 0.45 and 0.5 <= held.weights[1] < 0.51
    assert held.weights[2] > 0.3, "the cosine's weight learns what p_agent does not say"
    one_by_one = Calibration(0.05, min_slope=0.5, start=20.0, cosine=True)
    for p, fit, cosine in zip(*a_stream(0, 2_000), strict=True):
        one_by_one.learn(p, fit, cosine)
    np.testing.assert_array_equal(one_by_one.weights, held.weights)


def test_a_map_of_p_agent_alone_does_not_load_a_map_with_the_cosine() -> None:
    with_cosine = Calibration(0.05, cosine=True)
    with pytest.raises(ValueError, match="of 2 weights cannot load 3"):
        Calibration(0.05).load_state(with_cosine.state_dict())


def habitual(embedder: Embedder, held_under: float, catalogue: Sequence[ToolDoc] = CATALOGUE) -> Learner:
    """An agent that calls the right tool 80% of the time and any tool else 20%: its calls work `WORKS` of the
    time whichever it called. The choice model learns its habit (p_agent 0.9 and more for the right tool)."""
    tools = [t.name for t in catalogue]
    learner = Learner(LearnerConfig(policy_config=OutcomeModelConfig(held_under=held_under)), catalogue, embedder)
    rng, world = np.random.default_rng(0), np.random.default_rng(1)
    for i in range(300):
        right = list(REQUESTS)[i % 4]
        query = REQUESTS[right][(i // 4) % len(REQUESTS[right])]
        tool = right if world.random() < 0.8 else tools[int(world.integers(len(tools)))]
        ok = bool(world.random() < WORKS)
        step = Step(tool, ok, 80.0, query=query, session=f"s{i}", fault=None if ok else "fit")
        learner.learn(step, rng)
        learner.end_episode(step, 0.0, rng)
    return learner


def test_the_habit_of_an_agent_whose_calls_work_60_percent_is_reported_nearer_60_percent(embedder: Embedder) -> None:
    """On a request with no evidence, the confidence in the tool the agent habitually calls was its p_agent
    through a map held at slope ≥ 1: 0.93 where such calls work 0.6 of the time. Read through the map with the
    cosine, it is lower and nearer what they do; the ranking is the same."""
    before = habitual(embedder, held_under=math.inf).recommend(NEW, np.random.default_rng(2), top_k=3).ranked
    now = habitual(embedder, held_under=0.5).recommend(NEW, np.random.default_rng(2), top_k=3).ranked
    assert [r.tool for r in now] == [r.tool for r in before]
    first, was = now[0], before[0]
    assert first.tool == "get_weather" and first.evidence == 0.0 and first.p_agent is not None
    assert first.p_agent > 0.9 and was.expected > 0.9
    assert first.expected < was.expected - 0.05
    assert abs(first.expected - WORKS) < abs(was.expected - WORKS)


def test_a_state_saved_before_the_reported_map_loads_and_reports_as_it_did(embedder: Embedder) -> None:
    """An older state has no "reported": its map starts where the verdicts' map is (the cosine's weight 0), so
    the confidence reported after loading is the one reported before it, then learns from the calls after."""
    learner = habitual(embedder, held_under=0.5)
    state = learner.state_dict()
    del state["policy"]["reported"]
    older = Learner(LearnerConfig(), CATALOGUE, embedder)
    older.load_state(state)
    as_before = Learner(LearnerConfig(policy_config=OutcomeModelConfig(held_under=math.inf)), CATALOGUE, embedder)
    as_before.load_state(state)
    policy = older.policy
    assert isinstance(policy, OutcomeModel)
    np.testing.assert_array_equal(policy.reported.weights, [*policy.calibration.weights, 0.0])
    a = older.recommend(NEW, np.random.default_rng(3), top_k=3).ranked
    b = as_before.recommend(NEW, np.random.default_rng(3), top_k=3).ranked
    assert [r.tool for r in a] == [r.tool for r in b]
    np.testing.assert_allclose([r.expected for r in a], [r.expected for r in b], rtol=0, atol=1e-12)
    restored = Learner(LearnerConfig(), CATALOGUE, embedder)
    restored.load_state(learner.state_dict())
    again = restored.recommend(NEW, np.random.default_rng(3), top_k=3).ranked
    same = learner.recommend(NEW, np.random.default_rng(3), top_k=3).ranked
    assert [(r.tool, r.expected) for r in again] == [(r.tool, r.expected) for r in same]


# more tools than the choice model's shortlist (20): its softmax, and so p_agent, is over the best 20
MANY = [
    *CATALOGUE,
    *(
        ToolDoc(f"misc_{i}", f"Does task {i} with widgets and {w}.")
        for i, w in enumerate(["files", "maps", "notes", "photos"] * 10)
    ),
]


@pytest.mark.parametrize("catalogue", [CATALOGUE, MANY], ids=["few tools", "more than the shortlist"])
def test_the_estimates_an_admin_inspects_are_the_confidences_recommend_tool_reports(
    embedder: Embedder, catalogue: Sequence[ToolDoc]
) -> None:
    """`toolwise inspect qvalues` shows `Learner.estimates`: it showed the posterior the verdicts read, where
    recommend_tool reports it read through the map with the cosine, two figures for one tool and request; and
    p_agent over every tool, where recommend_tool's is over the shortlist."""
    learner = habitual(embedder, held_under=0.5, catalogue=catalogue)
    shown = {tool: value for tool, value, _ in learner.estimates(NEW, None, 0)}
    ranked = learner.recommend(NEW, np.random.default_rng(2), top_k=3).ranked
    assert ranked[0].expected > 0.5  # read through the map (under ½ it is the posterior)
    for r in ranked:
        assert shown[r.tool] == pytest.approx(r.expected, abs=1e-12), r.tool


def test_the_choice_models_estimates_over_more_tools_than_its_shortlist_are_the_probabilities_it_ranks_with(
    embedder: Embedder,
) -> None:
    """Policy `choice`: its `select` reports the softmax over its shortlist, its `expected` was over every tool."""
    learner = Learner(LearnerConfig(policy="choice", policy_config=ChoiceConfig()), MANY, embedder)
    rng = np.random.default_rng(0)
    for i in range(100):
        right = list(REQUESTS)[i % 4]
        step = Step(right, True, 80.0, query=REQUESTS[right][(i // 4) % len(REQUESTS[right])], session=f"s{i}")
        learner.learn(step, rng)
        learner.end_episode(step, 0.0, rng)
    shown = {tool: value for tool, value, _ in learner.estimates(NEW, None, 0)}
    for r in learner.recommend(NEW, np.random.default_rng(2), top_k=3).ranked:
        assert shown[r.tool] == pytest.approx(r.expected, rel=1e-12), r.tool
