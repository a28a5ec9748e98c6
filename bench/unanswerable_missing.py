"""The missing-tools arm of bench/unanswerable.py: "nothing fits" after toolwise has seen requests no tool serves.

The learned arm (bench/unanswerable_learned.py) learns only answerable requests, so toolwise never sees what
happens when a request whose tool is missing is tried. Here, per catalogue (BFCL live, NESTFUL, BFCL
multi-turn), a fixed random SHARE of its tools is removed (seeded, with the held-out kind's sibling rule:
tools sharing a removed tool's description or last name segment go too). A request whose first right
tool is gone is unanswerable (what it starts with is missing; NESTFUL's chains rarely lose every tool);
one whose right tools all remain is answerable; the others are left out.

The calibration split is streamed through the `Learner` API the live path uses: an answerable request's
right tools are called and work (as the learned arm does); an unanswerable one is met as an agent would
meet it (the assumption), by one of two agents:

- `fails`: it calls toolwise's first 1–3 recommendations (seeded) in turn, each fails (fault FIT), and
  it gives up (the session ends);
- `rated`: it calls toolwise's first recommendation, which "succeeds" but the user rates it 1–2, and it
  gives up.

Then the test split is judged (no judged text was learned): unanswerable requests (right: "nothing fits")
and answerable ones (hit@1, a "nothing fits" counting as a miss). References in the same run, their
thresholds chosen on the calibration split (half learned, half judged: `learn_fold`) losing at most
TARGET_DROP points of hit@1 on each catalogue: the embedding-cosine threshold; the nearest failed
request (nothing fits when the request's best cosine to a streamed request that failed everywhere beats
its best cosine to one that worked; and its threshold version: by a margin chosen on calibration).

    python bench/unanswerable_missing.py                    # both agents, three catalogues (~6 minutes)
    python bench/unanswerable_missing.py --agents fails --sets nestful   # iterating
"""

from __future__ import annotations

import argparse
import logging
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from unanswerable import SETS, data_set, split, without
from unanswerable_fitting import TARGET_DROP, logistic, probability_at
from unanswerable_learned import learn_fold, normal

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.calibration import logit_of
from toolwise.rl.fit import TRIED, FailedFit, FitConfig, failed_unfit_probability, relevance_of
from toolwise.rl.learner import Learner, LearnerConfig
from toolwise.rl.outcomes import Served
from toolwise.rl.steps import FIT, Step
from toolwise.rl.toolindex import ToolDoc

SHARE = 0.2  # of a catalogue's tools removed (before the sibling rule)
AGENTS = ("fails", "rated")
UNANSWERABLE = "missing"  # the row kind of a request whose first right tool was removed
ADDED_DROP = 1.0  # points of hit@1 FailedFit may cost on each calibration list, beyond the other models' losses


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
                self.answer(request["query"], list(request["tools"]), session, rng)
            else:
                self.fail(request["query"], session, rng)
            self.texts[kind == "answerable"].append(request["query"])

    def answer(self, query: str, tools: list[str], session: str, rng: np.random.Generator) -> None:
        chosen = self.learner.recommend(query, rng, top_k=1).chosen
        for position, tool in enumerate(tools):
            step = Step(
                tool,
                True,
                100.0,
                query=query,
                previous_tool=tools[position - 1] if position else None,
                position=position,
                history=tuple(tools[:position]),
                session=session,
                followed=position == 0 and tool == chosen,
                terminal=position == len(tools) - 1,
            )
            self.learner.learn(step, rng)

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
        served = learner.policy.served(learner.encode(query, None, 0), arms, coherence=False)
        if served is None or served.failed is None:
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


def rows_of(
    name: str, embedder: WordLlamaEmbedder, agent: str, fit: FitConfig, seed: int = 0
) -> tuple[list[MissingRow], list[MissingRow]]:
    """(fitting rows: half the calibration split learned, half judged; test rows: all of it learned)."""
    data = data_set(name)
    tools = removal(data.tools, seed)
    kept = {t.name for t in tools}
    typed = [(k, r) for r in data.requests if (k := kind_of(r, kept)) is not None]
    calibration = [(k, r) for k, r in typed if split(r["id"])]
    test = [(k, r) for k, r in typed if not split(r["id"])]
    half = [(k, r) for k, r in calibration if learn_fold(r["id"])]
    other = [(k, r) for k, r in calibration if not learn_fold(r["id"])]
    return judged_rows(tools, embedder, agent, half, other, fit), judged_rows(
        tools, embedder, agent, calibration, test, fit
    )


def threshold(calibration: list[list[MissingRow]], value: Callable[[MissingRow], float]) -> float:
    """The largest threshold (nothing fits below it) losing at most TARGET_DROP points of hit@1 on each set."""
    found = math.inf
    for rows in calibration:
        answerable = [r for r in rows if r.kind == "answerable"]
        hits = sorted(value(r) for r in answerable if r.hit)
        allowed = int(TARGET_DROP / 100 * len(answerable))
        found = min(found, hits[allowed] if allowed < len(hits) else math.inf)
    return found


def failed_probability(r: MissingRow, failed: FailedFit) -> float | None:
    """`FailedFit`'s probability for a judged row (None: no failed request near enough to judge)."""
    served = Served(np.array([r.near]), np.zeros(1), np.zeros(1, np.int64), np.full(1, -1.0), np.array([r.unserved]))
    return failed_unfit_probability(served, r.p_works, r.cosine, failed)


def failed_unfit_row(r: MissingRow, failed: FailedFit) -> bool:
    """toolwise's verdict with `failed` for FailedFit (the other models' verdict is `before`)."""
    probability = failed_probability(r, failed)
    return r.before or (probability is not None and probability > failed.threshold)


def fit_failed(calibration: list[list[MissingRow]]) -> FailedFit:
    """FailedFit fitted on the rows where a best candidate failed for some request (unanswerable against
    answerable hits), its threshold the lowest costing at most ADDED_DROP points of hit@1 on each list beyond
    the other models' losses (counting those left no room on BFCL multi-turn, where they lose 2 points)."""
    within = FailedFit().within
    pooled = [r for rows in calibration for r in rows if r.unserved >= within and r.near >= 0]
    positive = [r for r in pooled if r.kind == UNANSWERABLE]
    negative = [r for r in pooled if r.kind == "answerable" and r.hit]
    x = np.array([[logit_of(r.p_works), r.near, r.unserved, r.cosine] for r in positive + negative])
    w = [round(float(v), 3) for v in logistic(x, np.r_[np.ones(len(positive)), np.zeros(len(negative))])]
    config = FailedFit(intercept=w[0], p_works=min(w[1], 0.0), near=min(w[2], 0.0), failed=max(w[3], 0.0), cosine=w[4])
    cut = 0.0
    for rows in calibration:
        answerable = [r for r in rows if r.kind == "answerable"]
        hits = sorted(
            (p for r in answerable if r.hit and not r.before and (p := failed_probability(r, config)) is not None),
            reverse=True,
        )
        allowed = int(ADDED_DROP / 100 * len(answerable))
        cut = max(cut, hits[allowed] if allowed < len(hits) else 0.0)
    return replace(config, threshold=probability_at(math.log(cut / (1 - cut))) if 0 < cut < 1 else 0.9999)


def table(rows: Sequence[MissingRow], methods: dict[str, Callable[[MissingRow], bool]]) -> str:
    """Per method: the unanswerable requests said to fit nothing, answerable hit@1 and its drop (points)."""
    lines = ["| method | unanswerable: nothing fits | answerable hit@1 | drop (points) |", "|---|---:|---:|---:|"]
    answerable = [r for r in rows if r.kind == "answerable"]
    always = float(np.mean([r.hit for r in answerable]))
    for method, rule in methods.items():
        caught = float(np.mean([rule(r) for r in rows if r.kind == UNANSWERABLE]))
        kept = float(np.mean([r.hit and not rule(r) for r in answerable]))
        lines.append(f"| {method} | {100 * caught:.1f}% | {kept:.3f} | {100 * (always - kept):.1f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--seed", type=int, default=0, help="which tools are removed (the figures: 0)")
    parser.add_argument("--fit", action="store_true", help="fit FailedFit on the calibration splits (prints it)")
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    names = args.sets.split(",")
    every: dict[str, dict[str, tuple[list[MissingRow], list[MissingRow]]]] = {}
    for agent in args.agents.split(","):
        every[agent] = {name: rows_of(name, embedder, agent, FitConfig(), args.seed) for name in names}
    fitted = None
    if args.fit:  # a catalogue's calibration rows of every agent, one list
        fitted = fit_failed([[r for rows in every.values() for r in rows[name][0]] for name in names])
        print(f"FailedFit fitted on the calibration splits of {', '.join(names)}, every agent: {fitted}")
    for agent, rows in every.items():
        show(agent, names, rows, fitted)


def show(
    agent: str, names: list[str], rows: dict[str, tuple[list[MissingRow], list[MissingRow]]], fitted: FailedFit | None
) -> None:
    calibration = [rows[n][0] for n in names]
    cosine_at = threshold(calibration, lambda r: r.cosine)
    margin_at = threshold(calibration, lambda r: r.worked - r.failed)
    methods: dict[str, Callable[[MissingRow], bool]] = {
        "always answer": lambda r: False,
        f"embedding-cosine threshold ({cosine_at:.3f})": lambda r: r.cosine < cosine_at,
        "nearest failed request": lambda r: r.failed > r.worked,
        f"nearest failed request by a margin ({-margin_at:.3f})": lambda r: r.worked - r.failed < margin_at,
        "toolwise before (no FailedFit)": lambda r: r.before,
        "toolwise (rl/fit.py defaults)": lambda r: r.nothing_fits,
    }
    if fitted is not None:
        methods["toolwise, FailedFit refitted"] = lambda r: failed_unfit_row(r, fitted)
    print(f"\n\nAGENT {agent!r} (see the docstring); thresholds on the calibration splits of {', '.join(names)}")
    for name in names:
        test = rows[name][1]
        unanswerable = sum(r.kind == UNANSWERABLE for r in test)
        print(f"\n{name}, test split ({len(test) - unanswerable} answerable, {unanswerable} unanswerable):\n")
        print(table(test, methods))


if __name__ == "__main__":
    logging.getLogger("client").setLevel(logging.ERROR)
    main()
