"""The learned arm of bench/unanswerable.py: "nothing fits" after toolwise has seen traffic.

A fresh learner per catalogue learns a stream of the set's answerable requests, each request's right
tools called and working (`Learner.recommend`, then `Learner.learn` of each call, as the live path
does), then judges requests it never learned: answerable (whole catalogue), held-out (the catalogue
without the request's right tools, as `recommend`'s candidates) and BFCL's irrelevance requests.
No judged request's exact text is learned.

Two learners a catalogue: one learns half the calibration split (`learn_fold`) and judges the other
half (the rows FitConfig's learned coefficients and the references' thresholds are chosen on); the
other learns the whole calibration split and judges the test split (the figures).
"""

from __future__ import annotations

import hashlib
import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from unanswerable_fitting import KINDS, TARGET_DROP
from unanswerable_servers import KIND, server_groups, without_servers

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.fit import FitConfig, LearnedFit, Relevance, agent_logit, relevance_of, zero_shot_unfit
from toolwise.rl.learner import Learner, LearnerConfig
from toolwise.rl.policies.outcome import OutcomeModel
from toolwise.rl.steps import FIT, Step
from toolwise.rl.toolindex import ToolDoc


@dataclass(frozen=True, slots=True)
class LearnedRow:
    """One judged request after learning."""

    kind: str  # answerable, or one of KINDS
    hit: bool  # toolwise's first pick is right
    nothing_fits: bool  # toolwise said so
    cosine: float
    coverage: float
    disagreement: float  # log(1 + the candidates BM25 ranks above the embedding's best): rl/fit.py
    near: float  # the best cosine of x(q) to a request the first candidate worked for (−1: none)
    kinds: int  # prototypes of requests the first candidate worked for (OutcomeMemory.served)
    coherence: float  # how alike those are (OutcomeMemory.served)
    agent: float | None  # the choice model's probability that the agent calls the first candidate (p_agent)
    nearest: float  # the reference: the best cosine of x(q) to a request any candidate worked for (−1: none)


def learn_fold(identifier: str) -> bool:
    """Within the calibration split: True for the half the fitting learner learns."""
    # not CRC-32 again: its parity is affine in the input, so a prefixed CRC would split like the split did
    return hashlib.blake2b(identifier.encode(), digest_size=1).digest()[0] % 2 == 0


def normal(text: str) -> str:
    return " ".join(text.lower().split())


def learn(learner: Learner, requests: Sequence[dict[str, Any]], seed: int = 0) -> None:
    """The stream: each request recommended for, then its right tools called in turn, each working."""
    rng = np.random.default_rng(seed)
    for n, i in enumerate(rng.permutation(len(requests)).tolist()):
        answer(learner, requests[i]["query"], list(requests[i]["tools"]), f"stream-{n}", rng)


def answer(
    learner: Learner, query: str, tools: list[str], session: str, rng: np.random.Generator, *, errs: bool = False
) -> None:
    """One answerable request: recommended for, then its right tools called in turn, each working. `errs`:
    the agent calls the recommendation first, and where it is not a right tool that call fails (FIT) before
    the right tools are called (bench/unanswerable_stream.py's `errs` agent)."""
    chosen = learner.recommend(query, rng, top_k=1).chosen
    before = [chosen] if errs and chosen not in tools else []
    if before:
        learner.learn(Step(chosen, False, 100.0, query=query, session=session, fault=FIT, followed=True), rng)
    calls = before + tools
    for position, tool in enumerate(calls[len(before) :], start=len(before)):
        step = Step(
            tool,
            True,
            100.0,
            query=query,
            previous_tool=calls[position - 1] if position else None,
            position=position,
            history=tuple(calls[:position]),
            session=session,
            followed=position == 0 and tool == chosen,
            after_failure=position == len(before) and bool(before),
            terminal=position == len(calls) - 1,
        )
        learner.learn(step, rng)


def judge(
    learner: Learner, kind: str, query: str, right: frozenset[str], candidates: list[str] | None = None
) -> LearnedRow:
    rng = np.random.default_rng(zlib.crc32(query.encode()))
    decision = learner.recommend(query, rng, top_k=1, candidates=candidates)
    arms = learner.index.arms(candidates)
    relevance = relevance_of(learner.index, query, arms)
    if relevance is None:
        raise RuntimeError(f"no relevance for {query!r}: the learner has no embedder or no tools")
    policy, context = learner.policy, learner.encode(query, None, 0)
    if not isinstance(policy, OutcomeModel):
        raise TypeError(f"the policy {policy.name!r} keeps no outcomes per request")
    first = np.array([learner.index.tools.intern(decision.chosen)], dtype=np.int64)
    top = policy.served(context, first)
    every = policy.memory.served(arms, policy.choice.features(context), coherence=False)  # the reference
    return LearnedRow(
        kind,
        decision.chosen in right,
        decision.nothing_fits,
        relevance.cosine,
        relevance.coverage,
        relevance.disagreement,
        float(top.near[0]),
        int(top.kinds[0]),
        float(top.coherence[0]),
        decision.ranked[0].p_agent,
        float(every.near.max(initial=-1.0)),
    )


def learned_rows(
    tools: list[ToolDoc],
    learned: Sequence[dict[str, Any]],
    judged: Sequence[dict[str, Any]],
    irrelevant: Sequence[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    fit: FitConfig,
    held: Callable[[frozenset[str]], list[str]],
) -> list[LearnedRow]:
    """A learner that learned `learned` (less any request whose text is judged) judging `judged`
    (answerable, and held-out: against `held(right tools)`) and `irrelevant`."""
    judged_texts = {normal(r["query"]) for r in [*judged, *irrelevant]}
    learner = Learner(LearnerConfig(fit=fit), tools, embedder)
    learn(learner, [r for r in learned if normal(r["query"]) not in judged_texts])
    rows = [judge(learner, "answerable", r["query"], frozenset(r["tools"])) for r in judged]
    rows += [judge(learner, r["set"], r["query"], frozenset()) for r in irrelevant]
    rows += [judge(learner, "held-out", r["query"], frozenset(), held(frozenset(r["tools"]))) for r in judged]
    return rows


def server_missing_rows(
    tools: list[ToolDoc],
    server_of: Mapping[str, str],
    learned: Sequence[dict[str, Any]],
    judged: Sequence[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    fit: FitConfig,
) -> list[LearnedRow]:
    """`judged` each judged by a learner whose catalogue never had the servers of its right tools: it
    learned the requests of `learned` the rest of the catalogue serves (less any judged text), as a
    user without those servers would have taught it."""
    judged_texts = {normal(r["query"]) for r in judged}
    rows = []
    for gone, members in server_groups(judged, server_of).items():
        rest = without_servers(tools, server_of, gone)
        served = {t.name for t in rest}
        learner = Learner(LearnerConfig(fit=fit), rest, embedder)
        learn(learner, [r for r in learned if set(r["tools"]) <= served and normal(r["query"]) not in judged_texts])
        rows += [judge(learner, KIND, r["query"], frozenset()) for r in members]
    return rows


# -- fitting LearnedFit, and the references' thresholds ---------------------------------------------


def threshold(calibration: list[list[LearnedRow]], value: Callable[[LearnedRow], float]) -> float:
    """The largest threshold (nothing fits below it) losing at most TARGET_DROP points of hit@1 on each set."""
    return gated_threshold(calibration, value, lambda r: True, lambda r: False)


def gated_threshold(
    calibration: list[list[LearnedRow]],
    value: Callable[[LearnedRow], float],
    gate: Callable[[LearnedRow], bool],
    otherwise: Callable[[LearnedRow], bool],
) -> float:
    """As `threshold` for the rows through `gate`, the others decided by `otherwise`, whose losses count."""
    found = math.inf
    for rows in calibration:
        answerable = [r for r in rows if r.kind == "answerable"]
        lost = sum(r.hit and not gate(r) and otherwise(r) for r in answerable)
        hits = sorted(value(r) for r in answerable if r.hit and gate(r))
        allowed = max(int(TARGET_DROP / 100 * len(answerable)) - lost, 0)
        found = min(found, hits[allowed] if allowed < len(hits) else math.inf)
    return found


def zero_shot(config: FitConfig) -> Callable[[LearnedRow], bool]:
    return lambda r: zero_shot_unfit(Relevance(r.cosine, r.coverage, r.disagreement), config, r.kinds > 0)


def fit_learned(
    calibration: list[list[LearnedRow]], config: FitConfig, logistic: Callable[[np.ndarray, np.ndarray], np.ndarray]
) -> LearnedFit:
    """LearnedFit fitted on rows whose first candidate is known (unanswerable against answerable hits),
    its threshold the lowest losing at most TARGET_DROP points on each set, zero-shot losses counted."""
    least, alike = config.learned.min_kinds, config.learned.min_coherence

    def gate(r: LearnedRow) -> bool:
        return r.kinds >= least and r.coherence >= alike

    known = [r for rows in calibration for r in rows if gate(r)]
    positive = [r for r in known if r.kind in KINDS]
    negative = [r for r in known if r.kind == "answerable" and r.hit]
    x = np.array([[r.cosine, r.coverage, r.near, agent_logit(r.agent)] for r in positive + negative])
    w = logistic(x, np.r_[np.ones(len(positive)), np.zeros(len(negative))])

    def logit(r: LearnedRow) -> float:
        return float(w[0] + w[1] * r.cosine + w[2] * r.coverage + w[3] * r.near + w[4] * agent_logit(r.agent))

    cut = -gated_threshold(calibration, lambda r: -logit(r), gate, zero_shot(config))
    return LearnedFit(
        min_kinds=least,
        min_coherence=alike,
        intercept=round(float(w[0]), 3),
        cosine=round(float(w[1]), 3),
        coverage=round(float(w[2]), 3),
        near=round(float(w[3]), 3),
        agent=round(float(w[4]), 3),
        threshold=math.ceil(1e4 / (1 + math.exp(-cut))) / 1e4 if math.isfinite(cut) else 0.9999,
    )


def split_rows(
    tools: list[ToolDoc],
    requests: Sequence[dict[str, Any]],
    irrelevant: Sequence[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    fit: FitConfig,
    held: Callable[[frozenset[str]], list[str]],
    split: Callable[[str], bool],
    server_of: Mapping[str, str] | None = None,
) -> tuple[list[LearnedRow], list[LearnedRow]]:
    """The fitting rows (half the calibration split learned, the other half judged) and the test rows (the
    whole calibration split learned, the test split judged); with `server_of`, server-missing rows too."""
    calibration = [r for r in requests if split(r["id"])]
    test = [r for r in requests if not split(r["id"])]
    learned = [r for r in calibration if learn_fold(r["id"])]
    judged = [r for r in calibration if not learn_fold(r["id"])]
    irrelevant_calibration = [r for r in irrelevant if split(r["id"])]
    irrelevant_test = [r for r in irrelevant if not split(r["id"])]
    fitting = learned_rows(tools, learned, judged, irrelevant_calibration, embedder, fit, held)
    tested = learned_rows(tools, calibration, test, irrelevant_test, embedder, fit, held)
    if server_of is not None:
        fitting += server_missing_rows(tools, server_of, learned, judged, embedder, fit)
        tested += server_missing_rows(tools, server_of, calibration, test, embedder, fit)
    return fitting, tested


def each_after_the_others(
    tools: list[ToolDoc],
    requests: Sequence[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    fit: FitConfig,
    held: Callable[[frozenset[str]], list[str]],
    server_of: Mapping[str, str] | None = None,
) -> list[LearnedRow]:
    """Each request judged (answerable, held-out and, with `server_of`, server-missing) by a learner that
    learned all the others twice (its catalogue's): a small
    catalogue whose tools have each served every kind of request it has (the splits leave the README
    example's tools below `min_kinds`). A check of what the learned model costs there, not fitted on."""
    rows = []
    for request in requests:
        text = normal(request["query"])
        learner = Learner(LearnerConfig(fit=fit), tools, embedder)
        learn(learner, [r for r in requests if normal(r["query"]) != text] * 2)
        right = frozenset(request["tools"])
        rows.append(judge(learner, "answerable", request["query"], right))
        rows.append(judge(learner, "held-out", request["query"], frozenset(), held(right)))
        if server_of is not None:
            others = [r for r in requests if normal(r["query"]) != text] * 2
            rows += server_missing_rows(tools, server_of, others, [request], embedder, fit)
    return rows
