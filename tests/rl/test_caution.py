"""A tool whose annotations say it changes things is not first on the words of a request alone: it
gives up part of its text relevance until calls of it have worked (rl/features.py's caution). The
example's git tools, with the real embedding model."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import numpy as np
import pytest

from toolwise.learning.core import tool_doc
from toolwise.learning.embedding import load_embedder, tool_document
from toolwise.rl import Learner, Step, ToolDoc
from toolwise.rl.features import asks_to_read

GIT = [  # mcp-server-git's tools, descriptions, parameters and annotations as it serves them
    ("git_status", "Shows the working tree status", (), "reads"),
    (
        "git_diff_unstaged",
        "Shows changes in the working directory that are not yet staged",
        ("context_lines",),
        "reads",
    ),
    ("git_diff_staged", "Shows changes that are staged for commit", ("context_lines",), "reads"),
    ("git_add", "Adds file contents to the staging area", ("files",), "writes"),
    ("git_reset", "Unstages all staged changes", (), "destroys"),
    ("git_commit", "Records changes to the repository", ("message",), "writes"),
    ("git_log", "Shows the commit logs", ("max_count", "start_timestamp", "end_timestamp"), "reads"),
    ("git_diff", "Shows differences between branches or commits", ("target", "context_lines"), "reads"),
    (
        "git_show",
        "Shows the contents of a commit, or of a file or directory given as <revision>:<path>",
        ("revision",),
        "reads",
    ),
    ("git_branch", "List Git branches", ("branch_type", "contains", "not_contains"), "reads"),
    (
        "git_create_branch",
        "Creates a new branch from an optional base branch",
        ("branch_name", "base_branch"),
        "writes",
    ),
    ("git_checkout", "Switches branches", ("branch_name",), "writes"),
]


@pytest.fixture(scope="module")
def embedder():  # type: ignore[no-untyped-def]
    return load_embedder("wordllama")


def catalogue(*, annotated: bool) -> list[ToolDoc]:
    def schema(parameters: tuple[str, ...]) -> dict[str, Any]:
        return {"properties": {p: {"type": "string"} for p in ("repo_path", *parameters)}}

    return [
        ToolDoc(f"git__{n}", d, tool_document(f"git__{n}", None, d, schema(p)), e if annotated else "unknown")  # type: ignore[arg-type]
        for n, d, p, e in GIT
    ]


def test_a_destructive_tool_is_not_first_on_the_words_of_a_request_alone(embedder) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    bare = Learner(tools=catalogue(annotated=False), embedder=embedder)
    annotated = Learner(tools=catalogue(annotated=True), embedder=embedder)
    for query in ("stage all my changes", "what changed"):
        assert bare.recommend(query, rng, top_k=1).chosen == "git__git_reset"  # the words alone say reset
        assert annotated.recommend(query, rng, top_k=1).chosen != "git__git_reset", query


def test_the_caution_lifts_as_calls_of_the_tool_work(embedder) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    learner = Learner(tools=catalogue(annotated=True), embedder=embedder)
    query, reset = "take my files out of the staging area", np.array([learner.index.tools.get("git__git_reset") or 0])
    before = float(learner.features.kept(query, reset)[0])
    assert learner.recommend(query, rng, top_k=1).chosen != "git__git_reset"
    for _ in range(6):
        learner.learn(Step("git__git_reset", True, 40.0, query=query), rng)
    assert learner.recommend(query, rng, top_k=1).chosen == "git__git_reset"
    assert before < 0.5 < float(learner.features.kept(query, reset)[0]) < 1


def test_a_request_for_what_a_tool_says_it_does_lifts_its_caution(embedder) -> None:  # type: ignore[no-untyped-def]
    """The verb a description opens with ("Switches branches", "Unstages all staged changes") named by a
    request that asks to act is evidence enough; named by one that asks to read, it is not."""
    rng = np.random.default_rng(0)
    learner = Learner(tools=catalogue(annotated=True), embedder=embedder)
    for query, tool in (("switch to the develop branch", "git_checkout"), ("unstage everything", "git_reset")):
        assert learner.recommend(query, rng, top_k=1).chosen == f"git__{tool}", query
    assert learner.recommend("stage all my changes", rng, top_k=1).chosen != "git__git_reset"  # "Unstages"
    add = np.array([learner.index.tools.get("git__git_add") or 0])
    assert learner.features.kept("add README.md to the next commit", add)[0] == 1.0
    assert learner.features.kept("which files did I add?", add)[0] < 0.5  # asks to read: the caution stays


def test_a_request_to_act_is_for_a_tool_that_acts(embedder) -> None:  # type: ignore[no-untyped-def]
    """Where the catalogue says which of its tools change things, a tool that only reads gives up part of its
    relevance for a request that asks to act, so the caution of a tool that writes does not hand such a request
    to one that reads: "start a bugfix branch off main" is for "Creates a new branch from an optional base
    branch", not "List Git branches" (first before). A request that reads, and a catalogue with no tool that
    acts, keep the tools that read whole."""
    rng = np.random.default_rng(0)
    bare = Learner(tools=catalogue(annotated=False), embedder=embedder)
    annotated = Learner(tools=catalogue(annotated=True), embedder=embedder)
    for query in ("start a bugfix branch off main", "make a branch for the release", "open a release branch"):
        assert bare.recommend(query, rng, top_k=1).chosen == "git__git_create_branch", query  # the words alone
        assert annotated.recommend(query, rng, top_k=1).chosen == "git__git_create_branch", query
    branch = np.array([annotated.index.tools.get("git__git_branch") or 0])
    assert annotated.features.kept("open a release branch", branch)[0] < 1.0
    assert annotated.features.kept("list all branches", branch)[0] == 1.0
    assert annotated.features.kept(None, branch)[0] == 1.0
    reading = Learner(tools=[t for t in catalogue(annotated=True) if t.effect == "reads"], embedder=embedder)
    assert reading.features.kept("open a release branch", reading.index.active)[0] == 1.0


def test_a_tools_title_is_not_what_it_does() -> None:
    """A title names the tool ("Git Checkout"): its first word is no action a request can ask for."""
    tool = types.Tool(
        name="git__git_checkout",
        title="Git Checkout",
        description="Switches branches",
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
    )
    learner = Learner(tools=[tool_doc(tool)])
    checkout = learner.index.active
    assert learner.features.kept("switch to develop", checkout)[0] == 1.0
    assert learner.features.kept("git add README.md", checkout)[0] < 1.0


def test_a_request_that_asks_to_read_is_told_from_one_that_asks_to_act() -> None:
    assert all(map(asks_to_read, ["what changed", "Show me the log", "which files did I modify", "diff vs main?"]))
    imperative = ["compare my branch with main", "search the log for 'fix'", "explain this diff", "count the commits"]
    assert all(map(asks_to_read, imperative))  # a verb of looking asks to read, as "show" does
    assert not any(map(asks_to_read, ["stage all my changes", "commit with message 'x'", "showcase", None]))


def test_a_polite_question_asks_for_what_its_verb_says(embedder) -> None:  # type: ignore[no-untyped-def]
    """ "Could you switch to develop?" asks to act, as "switch to develop" does; "can you show me the log?" reads."""
    assert not any(
        map(asks_to_read, ["can you commit this?", "could you please switch to develop?", "please stage it"])
    )
    reading = [
        "can you show me the log?",
        "could you tell me what changed?",
        "can I commit now?",
        "can you help me find it?",
    ]
    assert all(map(asks_to_read, reading))
    rng = np.random.default_rng(0)
    learner = Learner(tools=catalogue(annotated=True), embedder=embedder)
    for query, tool in (
        ("could you switch to the develop branch?", "git_checkout"),
        ("can you unstage everything?", "git_reset"),
    ):
        assert learner.recommend(query, rng, top_k=1).chosen == f"git__{tool}", query


def test_a_polite_question_is_read_for_its_verb_past_the_words_that_soften_it(embedder) -> None:  # type: ignore[no-untyped-def]
    """ "Can you quickly show the new branch?" asks to read as "can you show the new branch?" does: a tool that
    writes is not first for it (read from the word after "you", it asked to act: git_create_branch first)."""
    softened = [
        "can you quickly show the new branch?",
        "would you mind showing the new branch?",
        "would you be able to show the new branch?",
        "could you kindly list the branches?",
        "can you also tell me which branch I'm on?",
    ]
    assert all(map(asks_to_read, softened))
    assert not any(map(asks_to_read, ["would you mind committing this?", "could you just switch to develop?"]))
    rng = np.random.default_rng(0)
    learner = Learner(tools=catalogue(annotated=True), embedder=embedder)
    for query in softened[:3]:
        assert learner.recommend(query, rng, top_k=1).chosen == "git__git_branch", query


def test_a_decision_reports_the_relevance_the_whole_prior_gives(embedder) -> None:  # type: ignore[no-untyped-def]
    """A decision computes the prior of its recommendations alone (`Features.prior_at`): the same numbers,
    to the last bit, as the prior over every tool, with the caution and what follows the previous tool."""
    rng = np.random.default_rng(0)
    learner = Learner(tools=catalogue(annotated=True), embedder=embedder)
    for _ in range(3):  # git_add, then git_commit, worked: a follow score after git_add
        learner.learn(Step("git__git_add", True, 40.0, query="stage my changes"), rng)
        learner.learn(Step("git__git_commit", True, 40.0, "commit", "git__git_add", 1, ("git__git_add",)), rng)
    assert learner.sequences.follow_scores("git__git_add")
    arms = learner.index.active[::-1].copy()
    for query, previous in (("stage all my changes", None), ("what changed", "git__git_add"), (None, "git__git_add")):
        whole = learner.features.prior(query, previous).take(arms)
        assert learner.features.prior_at(query, previous, arms).tobytes() == whole.tobytes()
        decision = learner.recommend(query, rng, previous_tool=previous, top_k=7)
        assert [r.prior for r in decision.ranked] == [
            float(learner.features.prior(query, previous)[learner.index.tools.get(r.tool) or 0])
            for r in decision.ranked
        ]
