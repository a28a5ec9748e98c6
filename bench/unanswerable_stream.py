"""The stream of bench/unanswerable_missing.py: a catalogue less a fifth of its tools, its calibration split
learned through `Learner` (answerable requests working, unanswerable ones tried by an agent and failing or
rated 1–2), the test split judged. See bench/unanswerable_missing.py for the assumptions and the figures."""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from unanswerable import data_set, split, without
from unanswerable_learned import answer, learn_fold, normal

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.fit import TRIED, FailedFit, FitConfig, relevance_of
from toolwise.rl.learner import Learner, LearnerConfig
from toolwise.rl.steps import FIT, Step
from toolwise.rl.toolindex import ToolDoc

SHARE = 0.2  # of a catalogue's tools removed (before the sibling rule)
AGENTS = ("fails", "rated")  # FailedFit's defaults are fitted on these agents' streams
ERRS = "errs"  # as `fails`, and an answerable request's wrong first pick fails before the right tools work
UNANSWERABLE = "missing"  # the row kind of a request whose first right tool was removed


@dataclass(frozen=True, slots=True)
class MissingRow:
    kind: str  # answerable or UNANSWERABLE
    hit: bool  # toolwise's first pick is right
    nothing_fits: bool  # toolwise said so
    cosine: float  # the best cosine of the request with a tool document (the reference's)
    failed: float  # its best cosine to a learned request that failed everywhere (−1: none)
    worked: float  # its best cosine to a learned request that worked (−1: none)
    p_works: float  # toolwise's first candidate's P(works)
    near: float  # the best cosine of x(q) to a request toolwise's first three worked for (Served.near)
    unserved: float  # and to one they only failed for (Served.failed)
    crowd: int  # the requests, on any tool, that only failed within FailedFit.crowd_within of x(q)
    before: bool = False  # toolwise without FailedFit said nothing fits


def removal(tools: list[ToolDoc], seed: int = 0) -> list[ToolDoc]:
    """The catalogue less SHARE of its tools (seeded) and their siblings."""
    rng = np.random.default_rng(seed)
    gone = rng.choice(len(tools), size=int(SHARE * len(tools)), replace=False).tolist()
    return without(tools, frozenset(tools[i].name for i in gone))


def kind_of(request: dict[str, Any], kept: set[str]) -> str | None:
    tools = request["tools"]
    if all(t in kept for t in tools):
        return "answerable"
    return UNANSWERABLE if tools[0] not in kept else None


class Stream:
    """A learner over the reduced catalogue and the texts it learned, by how they went (the reference's memory)."""

    def __init__(self, tools: list[ToolDoc], embedder: WordLlamaEmbedder, agent: str, fit: FitConfig) -> None:
        self.learner = Learner(LearnerConfig(fit=fit), tools, embedder)
        self.embedder, self.agent = embedder, agent
        self.texts: dict[bool, list[str]] = {True: [], False: []}  # worked → texts

    def learn(self, requests: Sequence[tuple[str, dict[str, Any]]], seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        for n, i in enumerate(rng.permutation(len(requests)).tolist()):
            kind, request = requests[i]
            session = f"stream-{n}"
            if kind == "answerable":
                answer(self.learner, request["query"], list(request["tools"]), session, rng, errs=self.agent == ERRS)
            else:
                self.fail(request["query"], session, rng)
            self.texts[kind == "answerable"].append(request["query"])

    def fail(self, query: str, session: str, rng: np.random.Generator) -> None:
        """The agent meets a request no tool serves: see the module's docstring."""
        learner = self.learner
        ranked = [r.tool for r in learner.recommend(query, rng, top_k=3).ranked]
        tries = 1 if self.agent == "rated" else int(rng.integers(1, 4))
        step, reward = None, 0.0
        for position, tool in enumerate(ranked[:tries]):
            success = self.agent == "rated"
            step = Step(
                tool,
                success,
                100.0,
                query=query,
                previous_tool=ranked[position - 1] if position else None,
                position=position,
                history=tuple(ranked[:position]),
                session=session,
                fault=None if success else FIT,
                after_failure=position > 0,
                followed=True,
            )
            reward = learner.learn(step, rng).reward
            if success:
                rated = replace(step, rating=int(rng.integers(1, 3)))
                reward = learner.observe_rating(rated, rng, reward).reward
                step = rated
        assert step is not None
        learner.end_episode(step, reward, rng)

    def judge(self, kind: str, query: str, right: frozenset[str], memory: dict[bool, np.ndarray]) -> MissingRow:
        learner = self.learner
        rng = np.random.default_rng(zlib.crc32(query.encode()))
        decision = learner.recommend(query, rng, top_k=TRIED)
        relevance = relevance_of(learner.index, query, learner.index.active)
        if relevance is None:
            raise RuntimeError(f"no relevance for {query!r}: the learner has no embedder or no tools")
        q = np.asarray(self.embedder.embed([query])[0], dtype=np.float64)
        q /= max(float(np.linalg.norm(q)), 1e-12)
        best = {ok: float((m @ q).max()) if len(m) else -1.0 for ok, m in memory.items()}
        arms = np.array([learner.index.tools.intern(r.tool) for r in decision.ranked], dtype=np.int64)
        context = learner.encode(query, None, 0)
        served = learner.policy.served(context, arms, coherence=False)
        crowd = learner.policy.failed_near(context, FailedFit().crowd_within)
        if served is None or served.failed is None or crowd is None:
            raise TypeError(f"the policy {learner.policy.name!r} keeps no outcomes per request")
        return MissingRow(
            kind,
            decision.chosen in right,
            decision.nothing_fits,
            relevance.cosine,
            best[False],
            best[True],
            decision.ranked[0].expected,
            float(served.near.max()),
            float(served.failed.max()),
            crowd,
        )

    def memory(self) -> dict[bool, np.ndarray]:
        """The learned texts' unit embeddings, by whether they worked."""
        out = {}
        for ok, texts in self.texts.items():
            m = np.asarray(self.embedder.embed(texts), dtype=np.float64) if texts else np.zeros((0, 1))
            out[ok] = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
        return out


def judged_rows(
    tools: list[ToolDoc],
    embedder: WordLlamaEmbedder,
    agent: str,
    learned: Sequence[tuple[str, dict[str, Any]]],
    judged: Sequence[tuple[str, dict[str, Any]]],
    fit: FitConfig,
) -> list[MissingRow]:
    """`judged` by toolwise (`fit`) after learning `learned`; `before`: by toolwise without FailedFit."""
    texts = {normal(r["query"]) for _, r in judged}
    out = []
    for config in (replace(fit, failed=replace(fit.failed, enabled=False)), fit):
        stream = Stream(tools, embedder, agent, config)
        stream.learn([(k, r) for k, r in learned if normal(r["query"]) not in texts])
        memory = stream.memory()
        out.append([stream.judge(k, r["query"], frozenset(r["tools"]), memory) for k, r in judged])
    return [replace(after, before=before.nothing_fits) for before, after in zip(*out, strict=True)]


Typed = list[tuple[str, dict[str, Any]]]  # (kind, request)


@dataclass(frozen=True, slots=True)
class Splits:
    """A set's catalogue less its removed tools, and its requests by kind in the two rounds of the stream:
    half the calibration split learned and the other half judged (fitting), then all of it learned and
    the test split judged."""

    tools: list[ToolDoc]
    rounds: tuple[tuple[Typed, Typed], tuple[Typed, Typed]]


def splits(name: str, seed: int = 0) -> Splits:
    data = data_set(name)
    tools = removal(data.tools, seed)
    kept = {t.name for t in tools}
    typed = [(k, r) for r in data.requests if (k := kind_of(r, kept)) is not None]
    calibration = [(k, r) for k, r in typed if split(r["id"])]
    test = [(k, r) for k, r in typed if not split(r["id"])]
    half = [(k, r) for k, r in calibration if learn_fold(r["id"])]
    other = [(k, r) for k, r in calibration if not learn_fold(r["id"])]
    return Splits(tools, ((half, other), (calibration, test)))


def rows_of(
    name: str, embedder: WordLlamaEmbedder, agent: str, fit: FitConfig, seed: int = 0
) -> tuple[list[MissingRow], list[MissingRow]]:
    """(fitting rows: half the calibration split learned, half judged; test rows: all of it learned)."""
    s = splits(name, seed)
    fitting, testing = (judged_rows(s.tools, embedder, agent, *pair, fit) for pair in s.rounds)
    return fitting, testing
