"""The "nothing fits" of rl/fit.py: a request no listed tool serves is said to fit nothing, with the ranking
still given; a related one is not; the switch and the lexical prior say nothing."""

from __future__ import annotations

import numpy as np
import pytest

from toolwise.learning.embedding import load_embedder
from toolwise.rl import Learner, LearnerConfig, LexicalIndex, ToolDoc
from toolwise.rl.embedding import Embedder
from toolwise.rl.fit import FitConfig

CATALOGUE = [
    ToolDoc("weather__forecast", "Weather forecast for a city: rain, temperature, wind"),
    ToolDoc("flights__search", "Search flights between two airports on a date"),
    ToolDoc("news__headlines", "Latest news headlines on a topic"),
    ToolDoc("calendar__create_event", "Create a calendar event at a date and time"),
]
UNRELATED = ["what is the capital of Peru", "write a haiku about autumn leaves", "sell 100 shares of Apple stock"]
RELATED = ["will it rain in Paris tomorrow", "book a flight from Paris to Rome"]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder("wordllama")
    assert loaded is not None
    return loaded


@pytest.mark.parametrize("query", UNRELATED)
def test_an_unrelated_request_fits_nothing_and_keeps_its_best_guesses(embedder: Embedder, query: str) -> None:
    decision = Learner(tools=CATALOGUE, embedder=embedder).recommend(query, np.random.default_rng(0), top_k=3)
    assert decision.nothing_fits
    assert len(decision.ranked) == 3 and decision.chosen in {t.name for t in CATALOGUE}


@pytest.mark.parametrize("query", RELATED)
def test_a_related_request_fits(embedder: Embedder, query: str) -> None:
    decision = Learner(tools=CATALOGUE, embedder=embedder).recommend(query, np.random.default_rng(0))
    assert not decision.nothing_fits


def test_switched_off_it_never_says_nothing_fits(embedder: Embedder) -> None:
    learner = Learner(LearnerConfig(fit=FitConfig(enabled=False)), CATALOGUE, embedder)
    assert not learner.recommend(UNRELATED[0], np.random.default_rng(0)).nothing_fits


def test_the_lexical_prior_alone_says_nothing(embedder: Embedder) -> None:
    assert not Learner(tools=CATALOGUE).recommend(UNRELATED[0], np.random.default_rng(0)).nothing_fits


def test_only_the_candidates_asked_for_count(embedder: Embedder) -> None:
    learner = Learner(tools=CATALOGUE, embedder=embedder)
    query = RELATED[0]  # the weather: served by weather__forecast alone
    assert not learner.recommend(query, np.random.default_rng(0)).nothing_fits
    others = ["flights__search", "news__headlines", "calendar__create_event"]
    assert learner.recommend(query, np.random.default_rng(0), candidates=others).nothing_fits


def test_a_bad_config_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="threshold"):
        FitConfig(threshold=1.0)
    with pytest.raises(ValueError, match="cosine"):
        FitConfig(cosine=2.0)
    with pytest.raises(ValueError, match="intercept"):
        FitConfig(intercept=float("nan"))


def test_coverage_says_how_much_of_the_query_the_best_document_holds() -> None:
    index = LexicalIndex(["weather forecast rain", "flight search airports", "news headlines topic"])
    whole, half, none = index.coverage("weather forecast"), index.coverage("weather haiku"), index.coverage("haiku")
    assert 0 < half < whole <= 1
    assert none == 0
