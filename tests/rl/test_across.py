"""Outcome evidence across requests (rl/across.py) and where the outcome policy lets it lead: over the choice
model's first on a session's first call, only where the first is predicted to fail across requests or
another of its first tools was seen to fail for the request, and another clearly fits, and only once such
leads have been seen to work (not for an agent that always calls toolwise's first where that works half the
time). Real embedding model for the policy's part."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from toolwise.learning.embedding import load_embedder
from toolwise.rl import Learner, LearnerConfig, ToolDoc
from toolwise.rl.across import AcrossConfig, FitAcross, Trials
from toolwise.rl.embedding import Embedder
from toolwise.rl.policies import OutcomeModel

CATALOGUE = [
    ToolDoc("convert_currency", "Convert an amount of money from one currency to another at today's rate."),
    ToolDoc("get_exchange_rate", "Get the exchange rate between two currencies."),
    ToolDoc("get_weather", "Current weather and forecast for a city."),
    ToolDoc("send_email", "Send an email to a recipient with a subject and body."),
]
REQUEST = "convert 250 dollars into euros"


def unit(v: NDArray[np.float64]) -> NDArray[np.float64]:
    out: NDArray[np.float64] = v / np.linalg.norm(v)
    return out


def test_a_run_of_calls_learned_at_once_is_learned_bit_for_bit_as_call_by_call() -> None:
    """`add_many` (a run: each tool's calls in rounds) leaves the same arrays as `add` call by call, a tool
    called several times in the run, a request with no text (x = 0: nothing learned) and tools beyond the
    arrays' first rows (grown as call by call) included."""
    rng = np.random.default_rng(3)
    x = np.stack([unit(rng.normal(size=128)) for _ in range(9)] + [np.zeros(128)])
    arms = [int(a) for a in rng.integers(0, 40, size=60)] + [2, 2, 2, 39]
    rows = [int(r) for r in rng.integers(0, len(x), size=len(arms))]
    fits = [float(f) for f in rng.random(len(arms)) > 0.3]
    one, many = FitAcross(128), FitAcross(128)
    for arm, row, fit in zip(arms, rows, fits, strict=True):
        one.add(arm, x[row], fit)
    many.add_many(arms, x, rows, fits)
    assert one.a_inv.tobytes() == many.a_inv.tobytes() and one.b.tobytes() == many.b.tobytes()
    assert len(many.b) > 16 and many.b[2].any()


def test_a_tool_that_failed_for_one_kind_of_request_is_predicted_to_fail_for_a_new_one_of_that_kind() -> None:
    rng = np.random.default_rng(0)
    kind_a, kind_b = rng.normal(size=128), rng.normal(size=128)
    fits = FitAcross(128, AcrossConfig(dim=32))
    for _ in range(6):  # the tool works for kind b, fails for kind a; never seen at the new requests below
        fits.add(0, unit(kind_a + 0.5 * rng.normal(size=128)), 0.0)
        fits.add(0, unit(kind_b + 0.5 * rng.normal(size=128)), 1.0)
    new_a, new_b = unit(kind_a + 0.5 * rng.normal(size=128)), unit(kind_b + 0.5 * rng.normal(size=128))
    arms = np.array([0, 7])  # 7: never called
    a, b = fits.predict(arms, new_a), fits.predict(arms, new_b)
    assert a[0] < 0.5 < b[0]
    assert a[1] == b[1] == 0.5, "a tool never called predicts ½"
    fits.revise(0, new_b, -1.0)  # a rating: a call counted as fitting did not
    assert fits.predict(arms, new_b)[0] < b[0]
    copy = FitAcross(128, AcrossConfig(dim=32))
    copy.load_state(fits.state_dict())
    assert np.array_equal(copy.predict(arms, new_a), fits.predict(arms, new_a))


def test_tools_none_of_which_was_called_predict_one_half_as_the_regression_does() -> None:
    """A decision's first tools, none called yet (the usual case in a large catalogue), are not gathered: ½
    each, what A⁻¹·0 gives; beside a called tool they go through the regression and give the same ½."""
    rng = np.random.default_rng(1)
    fits = FitAcross(128, AcrossConfig(dim=32))
    fits.add(3, unit(rng.normal(size=128)), 1.0)
    x = unit(rng.normal(size=128))
    uncalled = fits.predict(np.array([0, 1, 2, 40]), x)  # 40: beyond the arrays
    assert uncalled.dtype == np.float64 and uncalled.tolist() == [0.5] * 4
    beside = fits.predict(np.array([0, 3, 1, 2, 40]), x)
    assert beside[[0, 2, 3, 4]].tolist() == [0.5] * 4 and beside[1] != 0.5


def test_leads_across_requests_are_earned_only_by_the_other_tool_seen_to_work() -> None:
    trials = Trials()
    for i in range(50):  # an agent that always calls toolwise's first: it works there half the time, the other
        trials.note(f"q{i}", 0, 1)  # is never tried
        trials.count(f"q{i}", 0, float(i % 2), float(1 - i % 2))
    assert not trials.earned()
    for i in range(50, 60):  # an agent calling its own choice: the other works where it is called
        trials.note(f"q{i}", 0, 1)
        trials.count(f"q{i}", 1, 1.0, 0.0)
    assert trials.earned()
    trials.drop("q70")
    trials.count("q70", 0, 1.0, 0.0)  # no trial noted for it: nothing counted
    assert trials.record[0].tolist() == [25.0, 25.0]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder("wordllama")
    assert loaded is not None
    return loaded


def taught(embedder: Embedder, earned: bool) -> Learner:
    """A fresh learner whose evidence across requests says: the choice model's first for REQUEST fails for
    requests like it, get_exchange_rate fits them (taught at REQUEST's own vector, whose own outcome memory
    stays empty); `earned`: such leads were seen to work."""
    learner = Learner(LearnerConfig(policy="outcome"), CATALOGUE, embedder)
    policy = learner.policy
    assert isinstance(policy, OutcomeModel)
    first = learner.recommend(REQUEST, np.random.default_rng(0)).ranked[0].tool
    assert first != "get_exchange_rate"
    x = policy.choice.features(learner.encode(REQUEST, None, 0))
    for _ in range(4):
        policy.across.add(learner.index.tools.intern(first), x, 0.0)
        policy.across.add(learner.index.tools.intern("get_exchange_rate"), x, 1.0)
    if earned:
        for i in range(10):
            policy.trials.note(f"earlier{i}", 0, 1)
            policy.trials.count(f"earlier{i}", 1, 1.0, 0.0)
    return learner


def test_the_first_predicted_to_fail_across_requests_gives_way_once_such_leads_were_seen_to_work(
    embedder: Embedder,
) -> None:
    rng = np.random.default_rng(1)
    assert taught(embedder, earned=True).recommend(REQUEST, rng).ranked[0].tool == "get_exchange_rate"
    assert taught(embedder, earned=False).recommend(REQUEST, rng).ranked[0].tool != "get_exchange_rate"
    later = taught(embedder, earned=True).recommend(REQUEST, rng, previous_tool="get_weather", position=1)
    assert later.ranked[0].tool != "get_exchange_rate", "after a tool, the next is what the sequence says"


def test_a_state_saved_before_the_evidence_across_requests_loads_and_learns_it_afresh(embedder: Embedder) -> None:
    learner = taught(embedder, earned=True)
    state = learner.state_dict()
    del state["policy"]["across"], state["policy"]["trials"]
    older = Learner(LearnerConfig(policy="outcome"), CATALOGUE, embedder)
    older.load_state(state)
    rng = np.random.default_rng(2)
    assert older.recommend(REQUEST, rng).ranked[0].tool != "get_exchange_rate", "nothing across requests yet"
    restored = Learner(LearnerConfig(policy="outcome"), CATALOGUE, embedder)
    restored.load_state(learner.state_dict())
    assert restored.recommend(REQUEST, rng).ranked[0].tool == "get_exchange_rate"


def shown_to_fail(embedder: Embedder, failed: int | None) -> tuple[Learner, list[str]]:
    """A fresh learner, the choice model's order for REQUEST, and a call of its `failed`-th tool seen to fail
    at REQUEST itself (its own outcomes: predicted to fail there; None: no call)."""
    learner = Learner(LearnerConfig(policy="outcome"), CATALOGUE, embedder)
    policy = learner.policy
    assert isinstance(policy, OutcomeModel)
    order = [r.tool for r in learner.recommend(REQUEST, np.random.default_rng(0), top_k=4).ranked]
    x = policy.choice.features(learner.encode(REQUEST, None, 0))
    if failed is not None:
        policy.memory.add(learner.index.tools.intern(order[failed]), x, 0.0, 1.0)
    return learner, order


def fits_here(learner: Learner, tool: str) -> None:
    """Across requests, `tool` is seen to fit requests like REQUEST (taught at its vector)."""
    policy = learner.policy
    assert isinstance(policy, OutcomeModel)
    x = policy.choice.features(learner.encode(REQUEST, None, 0))
    for _ in range(4):
        policy.across.add(learner.index.tools.intern(tool), x, 1.0)


def test_where_the_first_failed_here_the_tool_that_fits_clearly_better_across_requests_replaces_it(
    embedder: Embedder,
) -> None:
    """No record needed: the request's own outcomes showed the agent's habit to fail. The replacement's
    confidence reads its fit across requests as its prior mean (put first for it, it works more often than
    the agent's choice of it says)."""
    rng = np.random.default_rng(3)
    learner, order = shown_to_fail(embedder, 0)
    ranked = learner.recommend(REQUEST, rng, top_k=4).ranked
    assert ranked[0].tool == order[1], "nothing across requests: the agent's next"
    before = next(r.expected for r in ranked if r.tool == order[3])
    fits_here(learner, order[3])
    first = learner.recommend(REQUEST, rng).ranked[0]
    assert first.tool == order[3]
    assert first.expected > before + 0.3, f"{first.expected:.2f} against {before:.2f}"
    later = learner.recommend(REQUEST, rng, previous_tool="get_weather", position=1)
    assert later.ranked[0].tool != order[3], "after a tool, the next is what the sequence says"


def test_where_another_of_the_agents_tools_failed_here_a_lead_across_requests_needs_no_predicted_failure(
    embedder: Embedder,
) -> None:
    """The first is never called across requests (fit ½, not predicted to fail), but the request is one the
    agent got wrong here: the tool that fits clearly better leads, once such leads have proved right."""
    rng = np.random.default_rng(4)
    for failed, earned in ((1, True), (1, False), (None, True)):
        learner, order = shown_to_fail(embedder, failed)
        fits_here(learner, order[3])
        policy = learner.policy
        assert isinstance(policy, OutcomeModel)
        for i in range(10 if earned else 0):
            policy.trials.note(f"earlier{i}", 0, 1)
            policy.trials.count(f"earlier{i}", 1, 1.0, 0.0)
        first = learner.recommend(REQUEST, rng).ranked[0].tool
        assert (first == order[3]) == (earned and failed is not None), f"{failed}, earned {earned}: {first} first"


def test_the_confidence_inspected_of_a_tool_put_first_for_its_fit_across_requests_is_the_one_recommended(
    embedder: Embedder,
) -> None:
    """`toolwise inspect qvalues` shows `Learner.estimates` read through recommend_tool's `confidence_of`: of
    the tool that replaced the agent's first (predicted to fail) for its fit across requests, it showed the
    P(works) read with the agent's choice of it, where recommend_tool reports it read with that fit."""
    learner, order = shown_to_fail(embedder, 0)
    fits_here(learner, order[3])
    ranked = learner.recommend(REQUEST, np.random.default_rng(3)).ranked
    assert ranked[0].tool == order[3]
    shown = {tool: value for tool, value, _ in learner.estimates(REQUEST, None, 0)}
    for r in ranked:
        assert shown[r.tool] == pytest.approx(r.expected, abs=1e-12), r.tool
    later = learner.recommend(REQUEST, np.random.default_rng(3), previous_tool="get_weather", position=1).ranked
    shown_later = {tool: value for tool, value, _ in learner.estimates(REQUEST, "get_weather", 1)}
    for r in later:  # after a tool nothing is put first for its fit across requests: the posterior as it is
        assert shown_later[r.tool] == pytest.approx(r.expected, abs=1e-12), r.tool
