"""The choice model (the default policy): an agent's calls teach it which tool is wanted, a success
never lowers the called tool, failures and passed-over recommendations push down, and its state
survives a round trip. With the real embedding model and a real extract (bench/data/bfcl_live)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from toolwise.learning.embedding import load_embedder, tool_document
from toolwise.rl import Learner, LearnerConfig, Step, StepColumns, ToolDoc
from toolwise.rl.context import query_only
from toolwise.rl.embedding import Embedder
from toolwise.rl.policies import ChoiceModel
from toolwise.rl.policies.base import Policy
from toolwise.rl.policies.choice_features import query_features, stacked_features

BFCL = Path(__file__).resolve().parents[2] / "bench" / "data" / "bfcl_live"


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    loaded = load_embedder("wordllama")
    assert loaded is not None
    return loaded


@pytest.fixture(scope="module")
def bfcl() -> tuple[list[ToolDoc], list[tuple[str, str]]]:
    tools = [json.loads(line) for line in (BFCL / "tools.jsonl").read_text().splitlines()]
    docs = [
        ToolDoc(t["name"], t["description"], tool_document(t["name"], None, t["description"], t["parameters"]))
        for t in tools
    ]
    queries = [json.loads(line) for line in (BFCL / "queries.jsonl").read_text().splitlines()]
    order = np.random.default_rng(0).permutation(len(queries))
    return docs, [(queries[i]["query"], queries[i]["tools"][0]) for i in order]


def agent_stream(learner: Learner, requests: list[tuple[str, str]]) -> tuple[list[bool], list[bool]]:
    """The agent calls the right tool itself and every call succeeds; before each call toolwise is
    asked (hit@1) and its prior alone is asked (the baseline)."""
    rng = np.random.default_rng(1)
    learned, prior = [], []
    for query, right in requests:
        prior.append(learner.recommend(query, rng, baseline=True).chosen == right)
        decision = learner.recommend(query, rng)
        learned.append(decision.chosen == right)
        passed_over = decision.chosen if decision.chosen != right else None
        learner.learn(Step(right, True, 50.0, query=query, passed_over=passed_over), rng)
    return learned, prior


def test_a_success_only_stream_of_agent_chosen_calls_rises_above_the_prior_and_stays(
    embedder: Embedder, bfcl: tuple[list[ToolDoc], list[tuple[str, str]]]
) -> None:
    docs, requests = bfcl
    stream = requests[:600] + requests[:600]  # users repeat requests: the second time it should know
    learned, prior = agent_stream(Learner(LearnerConfig(policy="choice"), docs, embedder), stream)
    for window in (slice(300, 600), slice(600, 900), slice(900, 1200)):
        assert np.mean(learned[window]) >= np.mean(prior[window]) + 0.05, (window, np.mean(learned[window]))
    assert np.mean(learned[900:]) >= np.mean(learned[300:600])  # it keeps what it learned


def test_the_reward_regression_it_replaces_does_not_learn_from_such_a_stream(
    embedder: Embedder, bfcl: tuple[list[ToolDoc], list[tuple[str, str]]]
) -> None:
    """The contrast that motivated the choice model (issue 23): the semantic residual stays at its prior."""
    docs, requests = bfcl
    learned, prior = agent_stream(Learner(LearnerConfig(policy="semantic"), docs, embedder), requests[:600])
    assert np.mean(learned[300:]) < np.mean(prior[300:]) + 0.05


def test_a_success_never_lowers_the_called_tool_in_its_context(
    embedder: Embedder, bfcl: tuple[list[ToolDoc], list[tuple[str, str]]]
) -> None:
    docs, requests = bfcl
    learner, rng = Learner(LearnerConfig(policy="choice"), docs, embedder), np.random.default_rng(2)
    policy = learner.policy
    assert isinstance(policy, ChoiceModel)
    for query, right in requests[:200]:
        history = ("get_current_weather",) if len(query) % 2 else ()
        arms = learner.index.active
        context = learner.encode(query, history[-1] if history else None, len(history))
        where = int(np.flatnonzero(arms == learner.index.tools.get(right))[0])
        before = policy.scores(policy.features(context), arms, learner.features.choice_rows(query, history, arms))
        step = Step(right, True, 50.0, query=query, previous_tool=history[-1] if history else None, history=history)
        learner.learn(step, rng)
        after = policy.scores(policy.features(context), arms, learner.features.choice_rows(query, history, arms))
        assert (after[where] - after).min() >= (before[where] - before).min() - 1e-9 or (
            int(np.argmax(after)) == where
        ), query


def test_a_failure_pushes_the_tool_down_for_that_kind_of_request_only(embedder: Embedder) -> None:
    catalogue = [
        ToolDoc("weather__forecast", "Weather forecast for a city: rain, temperature, wind"),
        ToolDoc("weather__alerts", "Severe weather alerts and warnings for a region"),
        ToolDoc("flights__search", "Search flights between two airports on a date"),
        ToolDoc("calendar__create_event", "Create a calendar event at a date and time"),
    ]
    learner, rng = Learner(LearnerConfig(policy="choice"), catalogue, embedder), np.random.default_rng(3)
    storm = "is there a storm warning for Florida"
    first = learner.recommend(storm, rng).chosen
    for _ in range(3):
        learner.learn(Step(first, False, 50.0, query=storm), rng)
    assert learner.recommend(storm, rng).chosen != first
    assert learner.recommend("book a flight from Paris to Rome on Friday", rng).chosen == "flights__search"


def test_a_passed_over_recommendation_loses_ground_to_what_the_agent_called(embedder: Embedder) -> None:
    catalogue = [
        ToolDoc("files__read", "Read a text file from disk"),
        ToolDoc("files__search", "Search files by name or content"),
        ToolDoc("git__log", "Show the commit history of a repository"),
    ]
    learner, rng = Learner(LearnerConfig(policy="choice"), catalogue, embedder), np.random.default_rng(4)
    query = "find the file that mentions the release date"
    recommended = learner.recommend(query, rng).chosen
    other = next(t.name for t in catalogue if t.name not in (recommended, "git__log"))
    for _ in range(5):
        learner.learn(Step(other, True, 50.0, query=query, passed_over=recommended), rng)
    assert learner.recommend(query, rng).chosen == other


def test_the_next_tool_after_a_tool_is_learned_from_the_sequence(embedder: Embedder) -> None:
    catalogue = [
        ToolDoc("files__read", "Read a text file from disk"),
        ToolDoc("files__edit", "Replace text in a file"),
        ToolDoc("git__commit", "Record changes to the repository"),
        ToolDoc("git__status", "Show the working tree status"),
    ]
    learner, rng = Learner(LearnerConfig(policy="choice"), catalogue, embedder), np.random.default_rng(5)
    for _ in range(20):
        history: list[str] = []
        for tool in ("git__status", "files__read", "files__edit", "git__commit"):
            step = Step(tool, True, 50.0, query="tidy up the changelog", history=tuple(history[-2:]))
            learner.learn(step, rng)
            history.append(tool)
    after_edit = learner.recommend("tidy up the changelog", rng, previous_tool="files__edit", history=history[1:3])
    assert after_edit.chosen == "git__commit"


def test_its_state_round_trips_and_ranks_the_same(
    embedder: Embedder, bfcl: tuple[list[ToolDoc], list[tuple[str, str]]]
) -> None:
    docs, requests = bfcl
    learner = Learner(LearnerConfig(policy="choice"), docs, embedder)
    agent_stream(learner, requests[:150])
    copy = Learner(LearnerConfig(policy="choice"), docs, embedder)
    copy.load_state(learner.state_dict())
    for query, _ in requests[150:200]:
        assert (
            copy.recommend(query, np.random.default_rng(0)).chosen
            == learner.recommend(query, np.random.default_rng(0)).chosen
        )
    policy: Policy = copy.policy
    assert isinstance(policy, ChoiceModel) and len(policy.memory) == 150


def test_a_replay_of_the_log_in_batches_learns_about_as_well_as_call_by_call(
    embedder: Embedder, bfcl: tuple[list[ToolDoc], list[tuple[str, str]]]
) -> None:
    """Catch-up after a start-up without a snapshot learns the log in minibatches (rl/batch.py): on
    requests it has not seen it ranks as well as the state learned live, call by call; on those it
    learned it remembers nearly as well (minibatch steps fit a single call less closely)."""
    docs, requests = bfcl
    steps = [Step(right, True, 50.0, query=query) for query, right in requests[:700]]
    choice = LearnerConfig(policy="choice")
    online, batched = Learner(choice, docs, embedder), Learner(choice, docs, embedder)
    rng = np.random.default_rng(6)
    for step in steps:
        online.learn(step, rng)
    for start in range(0, len(steps), 250):
        batched.learn_many(StepColumns.of(steps[start : start + 250]), rng)
    assert batched.updates == online.updates == len(steps)

    def hits(learner: Learner, asked: list[tuple[str, str]], baseline: bool = False) -> float:
        return float(np.mean([learner.recommend(q, rng, baseline=baseline).chosen == right for q, right in asked]))

    learned, unseen = requests[:300], requests[700:1000]
    assert hits(batched, unseen) >= hits(online, unseen) - 0.03, (hits(batched, unseen), hits(online, unseen))
    assert hits(batched, learned) >= hits(online, learned) - 0.1, (hits(batched, learned), hits(online, learned))
    assert hits(batched, learned) >= hits(online, learned, baseline=True) + 0.2


def test_the_repeat_feature_marks_the_tools_the_session_already_called() -> None:
    learner = Learner(tools=[ToolDoc(f"srv__t{i}", f"tool {i}") for i in range(6)])
    rows = learner.features.choice_rows(
        "anything", ["srv__t4", "srv__t1", "srv__t4", "gone__tool"], learner.index.active
    )
    assert rows[:, 4].tolist() == [0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
    assert not learner.features.choice_rows("anything", [], learner.index.active)[:, 4].any()


def test_a_runs_query_features_are_each_querys_to_the_last_bit() -> None:
    """x(q) of a run's distinct queries at once (`stacked_features`) is `query_features` of each: the same
    head, the same unit length, and no query stays zero."""
    rng = np.random.default_rng(4)
    embeddings = [rng.normal(size=256).astype(np.float32) for _ in range(20)] + [np.zeros(256, np.float32)]
    stacked = stacked_features(embeddings, 128)
    each = np.stack([query_features(query_only(e), 128) for e in embeddings])
    np.testing.assert_array_equal(stacked, each)
    assert not stacked[-1].any()
