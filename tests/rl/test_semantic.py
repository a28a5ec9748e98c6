"""The semantic policy: it learns on top of the prior, a failure stays local to its kind of request,
and its state is small. With the real embedding model and a real extract (bench/data/bfcl_live)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from toolwise.learning.embedding import load_embedder, tool_document
from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.embedding import Embedder
from toolwise.rl.policies import SemanticConfig, SemanticUCB

BFCL = Path(__file__).resolve().parents[2] / "bench" / "data" / "bfcl_live"


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    return load_embedder("wordllama")


def test_learning_beats_its_prior_on_real_requests(embedder) -> None:  # type: ignore[no-untyped-def]
    tools = [json.loads(line) for line in (BFCL / "tools.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (BFCL / "queries.jsonl").read_text().splitlines()]
    docs = [
        ToolDoc(t["name"], t["description"], tool_document(t["name"], None, t["description"], t["parameters"]))
        for t in tools
    ]
    order = np.random.default_rng(0).permutation(len(queries))[:600]
    learner, rng = Learner(LearnerConfig(policy="semantic"), docs, embedder), np.random.default_rng(1)
    learned, prior = [], []
    for i in order:
        query, right = queries[i]["query"], set(queries[i]["tools"])
        prior.append(learner.recommend(query, rng, top_k=1, baseline=True).chosen in right)
        chosen = learner.recommend(query, rng, top_k=1).chosen
        learned.append(chosen in right)
        learner.learn(Step(chosen, chosen in right, 50.0, query=query), rng)
    after = slice(300, None)  # after N = 300 requests
    assert np.mean(learned[after]) >= np.mean(prior[after]) + 0.05, (np.mean(learned[after]), np.mean(prior[after]))


CATALOGUE = [
    ToolDoc("weather__forecast", "Weather forecast for a city: rain, temperature, wind"),
    ToolDoc("flights__search", "Search flights between two airports on a date"),
    ToolDoc("news__headlines", "Latest news headlines on a topic"),
    ToolDoc("calendar__create_event", "Create a calendar event at a date and time"),
]


def test_failures_on_other_requests_do_not_drag_a_tool_down(embedder) -> None:  # type: ignore[no-untyped-def]
    learner, rng = Learner(LearnerConfig(policy="semantic"), CATALOGUE, embedder), np.random.default_rng(3)
    weather = "will it rain in Paris tomorrow"
    assert learner.recommend(weather, rng, top_k=1).chosen == "weather__forecast"
    flights = [
        "book a flight from Paris to Rome",
        "cheapest plane ticket to Berlin on Friday",
        "fly to Madrid next week",
    ]
    for i in range(30):  # the weather tool fails again and again on flight requests
        learner.learn(Step("weather__forecast", False, 100.0, query=flights[i % 3]), rng)
        learner.learn(Step("flights__search", True, 100.0, query=flights[i % 3]), rng)
    assert learner.recommend(weather, rng, top_k=1).chosen == "weather__forecast"
    assert learner.recommend("any flights to Rome on Monday", rng, top_k=1).chosen == "flights__search"


def test_state_for_a_thousand_tools_is_under_50_mb() -> None:
    policy = SemanticUCB()
    policy._ensure(999)
    assert policy.nbytes() < 50e6


def test_state_round_trips(embedder) -> None:  # type: ignore[no-untyped-def]
    learner, rng = Learner(LearnerConfig(policy="semantic"), CATALOGUE, embedder), np.random.default_rng(4)
    for query, tool, ok in [
        ("rain in Oslo", "weather__forecast", True),
        ("news about rain", "weather__forecast", False),
    ]:
        learner.learn(Step(tool, ok, 100.0, query=query), rng)
    copy = Learner(LearnerConfig(policy="semantic"), CATALOGUE, embedder)
    copy.load_state(learner.state_dict())
    assert copy.estimates("rain in Rome", None, 0) == learner.estimates("rain in Rome", None, 0)


FOLLOW = {"flights__search": "calendar__create_event", "news__headlines": "weather__forecast"}


def follow_ups(embedder, buckets: int) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Train on sessions where the right second tool depends on the first, then ask what comes next."""
    # The sequence model is off: what ranks the follow-up is the policy alone.
    config = LearnerConfig(
        policy="semantic", policy_config=SemanticConfig(previous_buckets=buckets), sequences_enabled=False
    )
    learner, rng = Learner(config, CATALOGUE, embedder), np.random.default_rng(5)
    query = "plan my trip to Rome on Friday"
    for i in range(40):
        previous = list(FOLLOW)[i % 2]
        for tool in (t.name for t in CATALOGUE if t.name != previous):
            learner.learn(Step(tool, tool == FOLLOW[previous], 100.0, query, previous, 1), rng)
    return {
        previous: learner.recommend(query, rng, previous_tool=previous, position=1, top_k=1).chosen
        for previous in FOLLOW
    }


def test_the_same_request_after_different_tools_gets_different_tools(embedder) -> None:  # type: ignore[no-untyped-def]
    assert follow_ups(embedder, 256) == FOLLOW
    without = follow_ups(embedder, 0)  # the query alone cannot tell the two follow-ups apart
    assert len(set(without.values())) == 1, without


def test_an_older_state_loads_with_its_query_learning_kept(embedder) -> None:  # type: ignore[no-untyped-def]
    learner, rng = Learner(LearnerConfig(policy="semantic"), CATALOGUE, embedder), np.random.default_rng(6)
    for query, tool, ok in [
        ("rain in Oslo", "weather__forecast", True),
        ("news about rain", "weather__forecast", False),
    ]:
        learner.learn(Step(tool, ok, 100.0, query=query), rng)
    state = learner.state_dict()
    policy = state["policy"]
    del policy["after"], policy["after_inv"]
    policy["schema"] = 1  # what a snapshot taken before the previous-tool block holds
    copy = Learner(LearnerConfig(policy="semantic"), CATALOGUE, embedder)
    copy.load_state(state)
    assert copy.estimates("rain in Rome", None, 0) == learner.estimates("rain in Rome", None, 0)


def test_a_state_with_another_previous_tool_block_is_refused() -> None:
    policy = SemanticUCB()
    policy._ensure(3)
    with pytest.raises(ValueError, match="previous-tool block"):
        SemanticUCB(SemanticConfig(previous_buckets=64)).load_state(policy.state_dict())


class CountingEmbedder:
    """An embedder that counts the texts it embeds (WordLlama's vectors)."""

    name = "counting"

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.embedded = inner, Counter[str]()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.embedded.update(texts)
        return self.inner.embed(texts)


def test_a_catalogue_change_keeps_the_query_vectors_and_ranks_by_the_new_catalogue(embedder) -> None:  # type: ignore[no-untyped-def]
    counting = CountingEmbedder(embedder)
    learner, rng = Learner(LearnerConfig(), CATALOGUE, counting), np.random.default_rng(7)
    rain = "will it rain in Paris tomorrow"
    assert learner.recommend(rain, rng, top_k=1, baseline=True).chosen == "weather__forecast"
    radar = ToolDoc("radar__rain_map", "Rain radar map: showers and storms over a city in the next hours")
    learner.set_tools([*CATALOGUE[1:], radar])  # the weather tool removed, a rain radar added
    decision = learner.recommend(rain, rng, top_k=len(CATALOGUE), baseline=True)
    assert counting.embedded[rain] == 1  # the request seen before is not embedded again
    assert decision.chosen == "radar__rain_map"  # but scored against the new catalogue
    assert "weather__forecast" not in {r.tool for r in decision.ranked}
