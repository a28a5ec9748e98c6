"""The "nothing fits" of rl/fit.py: a request no listed tool serves is said to fit nothing, with the ranking
still given; a related one is not; the switch and the lexical prior say nothing. Once the first candidate
is known by what it served, a request of the catalogue's domain far from all of it fits nothing too."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolwise.learning.embedding import load_embedder, tool_document
from toolwise.rl import Learner, LearnerConfig, LexicalIndex, Step, ToolDoc
from toolwise.rl.embedding import Embedder
from toolwise.rl.fit import FitConfig, LearnedFit, nothing_fits
from toolwise.rl.outcomes import OutcomeMemory, Served

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
    tried = ("weather__forecast", "news__headlines", "flights__search")
    assert not learner.recommend(RELATED[0], np.random.default_rng(0), tried=tried).nothing_fits


def test_three_different_tools_tried_and_failing_for_the_request_fit_nothing_whatever_its_words(
    embedder: Embedder,
) -> None:
    learner, query, rng = Learner(tools=CATALOGUE, embedder=embedder), RELATED[0], np.random.default_rng(0)
    three = ("weather__forecast", "news__headlines", "flights__search")
    assert learner.recommend(query, rng, tried=three).nothing_fits
    assert not learner.recommend(query, rng, tried=three[:2]).nothing_fits
    assert not learner.recommend(query, rng, tried=three[:1] * 3).nothing_fits  # one tool, retried
    assert learner.recommend(query, rng, candidates=three[:2], tried=three[:2]).nothing_fits  # every candidate tried
    off = Learner(LearnerConfig(fit=FitConfig(tried=0)), CATALOGUE, embedder)
    assert not off.recommend(query, rng, tried=three).nothing_fits


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
    with pytest.raises(ValueError, match="near"):
        LearnedFit(near=1.0)
    with pytest.raises(ValueError, match=r"LearnedFit\.threshold"):
        LearnedFit(threshold=0.0)
    with pytest.raises(ValueError, match=r"FitConfig\.tried"):
        FitConfig(tried=-1)


def test_coverage_says_how_much_of_the_query_the_best_document_holds() -> None:
    index = LexicalIndex(["weather forecast rain", "flight search airports", "news headlines topic"])
    whole, half, none = index.coverage("weather forecast"), index.coverage("weather haiku"), index.coverage("haiku")
    assert 0 < half < whole <= 1
    assert none == 0


# -- after learning: what each tool served --------------------------------------------------------

FILES = [
    ToolDoc("fs__read_file", "Read the contents of a file"),
    ToolDoc("fs__write_file", "Write text to a file, replacing its contents"),
    ToolDoc("fs__list_directory", "List the files and folders in a directory"),
    ToolDoc("fs__move_file", "Move or rename a file"),
]
SERVED = {  # the requests each tool was called for, and worked: alike, as a tool's requests often are
    "fs__read_file": [
        "show me what is in notes.txt",
        "show me what is in todo.txt",
        "show me what is in config.yaml",
        "show me what is in the README",
    ],
    "fs__write_file": [
        "write hello world to output.txt",
        "write my shopping list to list.txt",
        "write these settings to config.yaml",
        "write the summary to report.txt",
    ],
    "fs__list_directory": [
        "list the files in my documents folder",
        "list the files in src",
        "list the files in the downloads folder",
        "list the files under home",
    ],
    "fs__move_file": [
        "rename report.doc to final.doc",
        "rename photo.jpg to holiday.jpg",
        "rename draft.txt to notes.txt",
        "rename old.log to archive.log",
    ],
}
UNALIKE = [  # what fs__read_file served in another deployment: requests that share little but the tool
    "show me what is in notes.txt",
    "print config.yaml",
    "open the README and read it to me",
    "what does todo.md say",
]
MISSING = ["find every file containing the word TODO", "how much disk space is left on this drive"]  # no tool does it
PARAPHRASES = ["show me what is written in notes.txt", "rename report.doc to final_report.doc"]


def served(
    embedder: Embedder, calls: int = 4, requests: dict[str, list[str]] = SERVED, tools: list[ToolDoc] = FILES
) -> Learner:
    """A learner that saw each tool called for `calls` of its requests (kinds of request), each call working."""
    learner, rng = Learner(tools=tools, embedder=embedder), np.random.default_rng(0)
    for i in range(calls):
        for tool, queries in requests.items():
            learner.recommend(queries[i], rng)
            learner.learn(Step(tool, True, 100.0, query=queries[i], session=f"{tool}-{i}", terminal=True), rng)
    return learner


@pytest.mark.parametrize("query", MISSING)
def test_after_learning_a_request_whose_tool_is_missing_fits_nothing(embedder: Embedder, query: str) -> None:
    fresh = Learner(tools=FILES, embedder=embedder).recommend(query, np.random.default_rng(0))
    assert not fresh.nothing_fits  # its words alone seem to fit a file tool
    decision = served(embedder).recommend(query, np.random.default_rng(0), top_k=2)
    assert decision.nothing_fits and len(decision.ranked) == 2


WEATHER = [
    ToolDoc("weather__forecast", "Weather forecast for a city: rain, temperature, wind"),
    ToolDoc("weather__air_quality", "Air quality and pollen levels for a city"),
]
WEATHER_SERVED = {
    "weather__forecast": [
        "will it rain in Paris tomorrow",
        "will it rain in Rome tomorrow",
        "will it rain in Berlin on Sunday",
        "will it rain in Madrid this weekend",
    ],
    "weather__air_quality": [
        "how is the air quality in Paris today",
        "how is the air quality in Delhi today",
        "what is the pollen count in Rome today",
        "how is the air quality in Beijing today",
    ],
}


def test_after_learning_two_servers_a_request_of_a_server_not_installed_fits_nothing(embedder: Embedder) -> None:
    """What a user meets with no ride server installed: a catalogue of two servers (files, weather) whose tools
    each served alike requests; a ride fits nothing, the weather still gets its tool (the learned model fitted
    with requests whose whole server is missing: bench/unanswerable.py's server-missing split)."""
    learner = served(embedder, requests={**SERVED, **WEATHER_SERVED}, tools=FILES + WEATHER)
    assert learner.recommend("call a taxi to the airport", np.random.default_rng(0)).nothing_fits
    decision = learner.recommend("will it rain in Lisbon tomorrow", np.random.default_rng(0))
    assert decision.chosen == "weather__forecast" and not decision.nothing_fits


@pytest.mark.parametrize("query", PARAPHRASES)
def test_after_learning_a_paraphrase_of_a_served_request_fits(embedder: Embedder, query: str) -> None:
    assert not served(embedder).recommend(query, np.random.default_rng(0)).nothing_fits


def test_with_too_few_kinds_of_request_served_the_words_alone_decide(embedder: Embedder) -> None:
    assert not served(embedder, calls=2).recommend(MISSING[0], np.random.default_rng(0)).nothing_fits


def test_requests_served_that_are_unlike_one_another_leave_the_words_to_decide(embedder: Embedder) -> None:
    learner = served(embedder, requests={**SERVED, "fs__read_file": UNALIKE})
    decision = learner.recommend(MISSING[0], np.random.default_rng(0))
    assert decision.chosen == "fs__read_file" and not decision.nothing_fits


def test_what_a_tool_served_is_read_from_the_prototypes_that_worked() -> None:
    memory = OutcomeMemory(4)
    memory.add(0, np.array([1.0, 0.0, 0.0, 0.0]), worked=2.0, failed=0.0)
    memory.add(0, np.array([0.0, 1.0, 0.0, 0.0]), worked=0.0, failed=1.0)  # failed there: served nothing
    memory.add(1, np.array([0.0, 1.0, 0.0, 0.0]), worked=1.0, failed=0.0)
    for v in ([1.0, 0.0, 0.0, 0.0], [0.8, 0.6, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]):  # nearest others: 0.8, 0.8, 0
        memory.add(2, np.array(v), worked=1.0, failed=0.0)
    x = np.array([0.6, 0.8, 0.0, 0.0])
    found = memory.served(np.array([0, 1, 2, 3, 99]), x)
    assert found.near.tolist() == pytest.approx([0.6, 0.8, 0.96, -1.0, -1.0])
    assert found.worked.tolist() == [2.0, 1.0, 3.0, 0.0, 0.0]
    assert found.kinds.tolist() == [1, 1, 3, 0, 0]
    assert found.coherence.tolist() == pytest.approx([-1.0, -1.0, 0.8, -1.0, -1.0])


def test_a_request_the_learned_choice_model_is_torn_over_fits_nothing_where_a_sure_one_fits(embedder: Embedder) -> None:
    """Its first candidate known alike by what it served (as near as the request comes to it), a request the
    agent would surely call it for fits; one the choice model is torn over (p_agent low: its tool missing,
    near ones compete) does not."""
    learner = Learner(tools=FILES, embedder=embedder)
    query, arms = "find every file containing the word TODO", learner.index.active
    served = Served(np.array([0.4]), np.array([4.0]), np.array([4]), np.array([0.8]))
    config = FitConfig()
    assert nothing_fits(learner.index, query, arms, config, served, p_agent=0.3)
    assert not nothing_fits(learner.index, query, arms, config, served, p_agent=0.99)


BFCL = Path(__file__).resolve().parents[2] / "bench" / "data" / "bfcl_live"


def test_on_a_real_catalogue_a_request_whose_tool_is_missing_is_often_said_to_fit_nothing(embedder: Embedder) -> None:
    """BFCL live (528 tools), 300 of its requests: with a request's right tools left out of the candidates
    (the catalogue's domain, its tool missing) a fresh learner says nothing fits to more than a tenth (the
    relevance of the best candidate alone: 3 of them); with them listed it costs few right answers."""
    tools = [json.loads(line) for line in (BFCL / "tools.jsonl").read_text().splitlines()]
    queries = [json.loads(line) for line in (BFCL / "queries.jsonl").read_text().splitlines()]
    docs = [
        ToolDoc(t["name"], t["description"], tool_document(t["name"], None, t["description"], t["parameters"]))
        for t in tools
    ]
    learner, rng = Learner(tools=docs, embedder=embedder), np.random.default_rng(0)
    held_out, hits_said_unfit = 0, 0
    for i in np.random.default_rng(0).permutation(len(queries))[:300].tolist():
        query, right = queries[i]["query"], set(queries[i]["tools"])
        others = [t.name for t in docs if t.name not in right]
        held_out += learner.recommend(query, rng, top_k=1, candidates=others).nothing_fits
        whole = learner.recommend(query, rng, top_k=1)
        hits_said_unfit += whole.chosen in right and whole.nothing_fits
    assert held_out >= 30
    assert hits_said_unfit <= 9  # at most 3 points of hit@1
