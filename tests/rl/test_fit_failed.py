""" "Nothing fits" learned from requests seen failing (rl/fit.py's FailedFit): after an agent tried requests no
tool serves on the nearest tools and they failed (or were rated 1–2), an unseen request alike fits nothing,
while a request a tool worked for nearby still gets it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.rl.test_fit import FILES, SERVED
from toolwise.learning.embedding import load_embedder
from toolwise.rl import Learner, LearnerConfig, Step
from toolwise.rl.embedding import Embedder
from toolwise.rl.fit import FailedFit, FitConfig, failed_unfit, failed_unfit_probability
from toolwise.rl.outcomes import OutcomeMemory, Served
from toolwise.rl.steps import FIT

TRIED = [  # a capability the file tools lack: each tried on the nearest tools, each failing
    "search all my files for the word TODO",
    "search the files in src for the word TODO",
    "search the project files for the word TODO",
]
UNSEEN = "search all the files in docs for the word FIXME"
ANSWERABLE = "show me what is in plan.txt"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder("wordllama")
    assert loaded is not None
    return loaded


def learner_after(embedder: Embedder, agent: str, fit: FitConfig | None = None) -> Learner:
    """Each file tool worked for its four requests; then each of TRIED met by the `agent`: "fails" calls the
    three first recommendations, each failing, and gives up; "rated" calls the first, which "succeeds" and
    is rated 1, and gives up."""
    learner, rng = Learner(LearnerConfig(fit=fit or FitConfig()), FILES, embedder), np.random.default_rng(0)
    for i in range(4):
        for tool, queries in SERVED.items():
            learner.recommend(queries[i], rng)
            learner.learn(Step(tool, True, 100.0, query=queries[i], session=f"{tool}-{i}", terminal=True), rng)
    for n, query in enumerate(TRIED):
        tools = [r.tool for r in learner.recommend(query, rng, top_k=3).ranked]
        tools = tools[:1] if agent == "rated" else tools
        step, reward = None, 0.0
        for position, tool in enumerate(tools):
            success = agent == "rated"
            step = Step(
                tool,
                success,
                100.0,
                query=query,
                previous_tool=tools[position - 1] if position else None,
                position=position,
                history=tuple(tools[:position]),
                session=f"missing-{n}",
                fault=None if success else FIT,
            )
            reward = learner.learn(step, rng).reward
            if success:
                step = replace(step, rating=1)
                reward = learner.observe_rating(step, rng, reward).reward
        assert step is not None
        learner.end_episode(step, reward, rng)
    return learner


@pytest.mark.parametrize("agent", ["fails", "rated"])
def test_after_alike_requests_failed_on_the_nearest_tools_an_unseen_one_fits_nothing(
    embedder: Embedder, agent: str
) -> None:
    without = FitConfig(failed=FailedFit(enabled=False))
    assert not learner_after(embedder, agent, without).recommend(UNSEEN, np.random.default_rng(0)).nothing_fits
    decision = learner_after(embedder, agent).recommend(UNSEEN, np.random.default_rng(0), top_k=2)
    assert decision.nothing_fits and len(decision.ranked) == 2  # the best guesses still given


@pytest.mark.parametrize("agent", ["fails", "rated"])
def test_after_failures_nearby_a_request_a_tool_served_still_gets_it(embedder: Embedder, agent: str) -> None:
    decision = learner_after(embedder, agent).recommend(ANSWERABLE, np.random.default_rng(0))
    assert decision.chosen == "fs__read_file" and not decision.nothing_fits


def test_a_tool_failed_for_a_request_it_never_served_reads_as_unserved_there() -> None:
    memory = OutcomeMemory(4)
    memory.add(0, np.array([1.0, 0.0, 0.0, 0.0]), worked=1.0, failed=0.0)
    memory.add(0, np.array([0.0, 1.0, 0.0, 0.0]), worked=0.0, failed=1.0)  # failed only: unserved
    memory.add(1, np.array([0.0, 1.0, 0.0, 0.0]), worked=1.0, failed=1.0)  # worked too: not unserved
    found = memory.served(np.array([0, 1, 2]), np.array([0.6, 0.8, 0.0, 0.0]))
    assert found.failed is not None
    assert found.failed.tolist() == pytest.approx([0.8, -1.0, -1.0])
    assert found.near.tolist() == pytest.approx([0.6, 0.8, -1.0])


def test_the_requests_that_only_failed_near_a_request_are_counted_over_every_tool() -> None:
    memory = OutcomeMemory(4)
    memory.add(0, np.array([0.0, 1.0, 0.0, 0.0]), worked=0.0, failed=1.0)  # failed only, cosine 0.8
    memory.add(1, np.array([0.0, 1.0, 0.0, 0.0]), worked=0.0, failed=2.0)  # the same request on another tool
    memory.add(1, np.array([1.0, 0.0, 0.0, 0.0]), worked=0.0, failed=1.0)  # failed only, cosine 0.6
    memory.add(2, np.array([0.0, 1.0, 0.0, 0.0]), worked=1.0, failed=1.0)  # worked too: served there
    memory.add(3, np.array([0.0, 0.0, 1.0, 0.0]), worked=0.0, failed=1.0)  # failed only, far (cosine 0)
    x = np.array([0.6, 0.8, 0.0, 0.0])
    assert [memory.failed_near(x, within) for within in (0.9, 0.7, 0.5)] == [0, 2, 3]
    assert OutcomeMemory(4).failed_near(x, 0.5) == 0


def test_a_request_many_failed_requests_come_near_fits_nothing_where_one_alone_leaves_it_open() -> None:
    """As near the best candidates' failures and served requests, a request that many requests seen only
    failing surround (a missing tool asked for again and again) is likelier unserved than one a single
    failure is near."""
    served = Served(np.array([0.55, 0.4, 0.3]), np.zeros(3), np.zeros(3, np.int64), np.full(3, -1.0))
    served.failed = np.array([0.6, -1.0, -1.0])
    failed = FailedFit()
    alone = failed_unfit_probability(served, 0.4, 0.45, failed, 1)
    crowded = failed_unfit_probability(served, 0.4, 0.45, failed, 12)
    assert alone is not None and crowded is not None
    assert alone <= failed.threshold < crowded


def test_where_the_failures_nearby_show_a_fit_the_other_models_nothing_fits_is_overruled(embedder: Embedder) -> None:
    """A request near what the first candidate served, the best candidates' failures only loosely alike and
    no failed request near it: the other models' "nothing fits" (`said`) is overruled; with a failed request
    near, or with the overruling switched off, it stands."""
    learner = Learner(tools=FILES, embedder=embedder)
    served = Served(np.array([0.6, 0.2, -1.0]), np.array([4.0, 1.0, 0.0]), np.array([4, 1, 0]), np.full(3, -1.0))
    served.failed = np.array([-1.0, 0.35, -1.0])
    failed, arms = FailedFit(), learner.index.active

    def verdict(near_failed: int, said: bool, fit: FailedFit = failed) -> bool:
        return failed_unfit(learner.index, ANSWERABLE, arms, served, 0.8, fit, lambda: near_failed, said)

    assert not verdict(0, said=True) and not verdict(0, said=False)
    assert verdict(1, said=True) and not verdict(1, said=False)
    assert verdict(0, said=True, fit=replace(failed, overrule_below=0))


def test_a_bad_failed_fit_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"FailedFit\.threshold"):
        FailedFit(threshold=1.0)
    with pytest.raises(ValueError, match=r"FailedFit\.p_works"):
        FailedFit(failed=-1.0)
    with pytest.raises(ValueError, match=r"crowd and overrule_below ≥ 0"):
        FailedFit(crowd=-0.5)
    with pytest.raises(ValueError, match=r"FailedFit\.within and crowd_within"):
        FailedFit(crowd_within=0.0)
