"""What a decision could read to tell an unanswerable request from an answerable one: a feature dump.

For each catalogue of bench/unanswerable.py (BFCL live, NESTFUL, BFCL multi-turn, the README's
example) and each request kind (answerable; held-out: the catalogue without the request's right tools,
given as `candidates`; BFCL's irrelevance and live irrelevance), a zero-shot learner's first pick and
the numbers known at decision time beside it: the cosine of the best candidates and how the best
stands out from the rest, BM25 coverage, whether BM25 and the embedding agree on the first tool, and
how much of the request's words (after the tokenizer) the first tool's document and the candidates'
documents hold, idf-weighted and for the rarest word. Printed per catalogue: each number's median per
kind and how well it tells held-out requests from right answers (AUC), the analysis behind the inputs
rl/fit.py reads (`python bench/unanswerable_features.py [--out DIR]`, about a minute; --out writes the
numbers as .npz for further analysis; --learned: after learning each BFCL set's calibration split, its
test split, with the first candidate's nearest served request and p_agent beside them).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import unanswerable_learned as learned
from unanswerable import HERE, SETS, DataSet, data_set, everyday_set, load, remaining, split

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.fit import relevance_of
from toolwise.rl.learner import Learner, LearnerConfig
from toolwise.rl.policies.outcome import OutcomeModel
from toolwise.rl.text import tokenize

NAMES = [
    "c1",
    "c2",
    "c3",
    "cmean",
    "cstd",
    "cov",
    "pick_cos",
    "pick_bm",
    "agree",
    "bm_rank",
    "cos_rank",
    "n_tokens",
    "known_frac",
    "pick_frac",
    "pick_idf_frac",
    "rare_in_pick",
    "rare_known",
    "any_idf_frac",
    "hit",
]


class Words:
    """Document frequencies of the catalogue's words, for the candidates' share of a request's words."""

    def __init__(self, learner: Learner) -> None:
        names = learner.index.tools.names
        self.tokens = [frozenset(tokenize(learner.index.documents[n])) for n in names]
        self.df: Counter[str] = Counter(t for doc in self.tokens for t in doc)

    def of(self, query: str, arms: np.ndarray, pick: int, removed: list[int]) -> list[float]:
        df = self.df.copy()
        for arm in removed:
            df.subtract(self.tokens[arm])
        n = len(arms)
        terms = list(dict.fromkeys(tokenize(query)))
        if not terms:
            return [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        idf = {t: math.log1p((n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
        known = [t for t in terms if df[t] > 0]
        in_pick = [t for t in terms if t in self.tokens[pick]]
        total = sum(idf.values())
        rare = max(known, key=lambda t: idf[t]) if known else None
        return [
            float(len(terms)),
            len(known) / len(terms),
            len(in_pick) / len(terms),
            sum(idf[t] for t in in_pick) / total,
            float(rare is not None and rare in self.tokens[pick]),
            float(rare is not None),
            sum(idf[t] for t in known) / total,
        ]


def features(learner: Learner, words: Words, query: str, right: frozenset[str], held: list[str] | None) -> list[float]:
    rng = np.random.default_rng(zlib.crc32(query.encode()))
    decision = learner.recommend(query, rng, top_k=1, candidates=held)
    index = learner.index
    arms = index.arms(held)
    relevance = relevance_of(index, query, arms)
    assert index.semantic is not None and relevance is not None
    cos = index.semantic.scores(query).take(arms)
    bm = index.lexical.scores(query).take(arms)
    order = np.sort(cos)[::-1]
    pick = index.tools.intern(decision.chosen)
    at = int(np.flatnonzero(arms == pick)[0])
    cos_top, bm_top = int(np.argmax(cos)), int(np.argmax(bm))
    removed = [] if held is None else sorted(set(range(len(index.tools.names))) - set(arms.tolist()))
    return [
        float(order[0]),
        float(order[1]) if len(order) > 1 else 0.0,
        float(order[2]) if len(order) > 2 else 0.0,
        float(cos.mean()),
        float(cos.std()),
        relevance.coverage,
        float(cos[at]),
        float(bm[at]) * index.lexical.coverage(query),
        float(cos_top == bm_top),
        float((bm > bm[cos_top]).sum()),
        float((cos > cos[bm_top]).sum()),
        *words.of(query, arms, pick, removed),
        float(decision.chosen in right),
    ]


def dump(data: DataSet, irrelevant: list[dict[str, Any]], embedder: WordLlamaEmbedder) -> tuple[np.ndarray, np.ndarray]:
    """Each request's numbers (rows as NAMES) and kind: answerable and held-out per request, then irrelevance."""
    learner = Learner(LearnerConfig(), data.tools, embedder)
    words = Words(learner)
    rows, kinds = [], []
    for r in data.requests:
        right = frozenset(r["tools"])
        for kind, held in (("answerable", None), ("held-out", remaining(data.tools, right))):
            rows.append(features(learner, words, r["query"], right, held))
            kinds.append(kind)
    for r in irrelevant:
        rows.append(features(learner, words, r["query"], frozenset(), None))
        kinds.append(r["set"])
    return np.array(rows), np.array(kinds)


LEARNED = ["near", "p_agent"]  # after learning: the first candidate's nearest served request, its p_agent


def after_learning(learner: Learner, query: str, held: list[str] | None) -> list[float]:
    """The learned numbers of the first candidate (bench/unanswerable_learned.py's `near` and `agent`)."""
    rng = np.random.default_rng(zlib.crc32(query.encode()))
    decision = learner.recommend(query, rng, top_k=1, candidates=held)
    policy = learner.policy
    if not isinstance(policy, OutcomeModel):
        raise TypeError(f"the policy {policy.name!r} keeps no outcomes per request")
    first = np.array([learner.index.tools.intern(decision.ranked[0].tool)], dtype=np.int64)
    near = float(policy.served(learner.encode(query, None, 0), first, coherence=False).near[0])
    return [near, decision.ranked[0].p_agent or 0.0]


def dump_learned(
    data: DataSet, irrelevant: list[dict[str, Any]], embedder: WordLlamaEmbedder
) -> tuple[np.ndarray, np.ndarray]:
    """As `dump` (columns NAMES then LEARNED, hit last) for the test split, after a learner learned the
    calibration split's answerable requests as bench/unanswerable.py's learned arm does."""
    test = [r for r in data.requests if not split(r["id"])]
    judged = [r for r in irrelevant if not split(r["id"])]
    texts = {learned.normal(r["query"]) for r in [*test, *judged]}
    learner = Learner(LearnerConfig(), data.tools, embedder)
    learned.learn(learner, [r for r in data.requests if split(r["id"]) and learned.normal(r["query"]) not in texts])
    words = Words(learner)
    rows, kinds = [], []
    asked = [(r, kind) for r in test for kind in ("answerable", "held-out")] + [(r, r["set"]) for r in judged]
    for r, kind in asked:
        right = frozenset(r.get("tools", ()))
        held = remaining(data.tools, right) if kind == "held-out" else None
        numbers = features(learner, words, r["query"], right if kind == "answerable" else frozenset(), held)
        rows.append(numbers[:-1] + after_learning(learner, r["query"], held) + numbers[-1:])
        kinds.append(kind)
    return np.array(rows), np.array(kinds)


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, ties sharing their mean rank (many of these numbers are counts or yes/no)."""
    order = np.argsort(values, kind="stable")
    where = np.empty(len(values), dtype=np.int64)
    where[order] = np.arange(len(values))
    ordered = values[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    group = first.cumsum()[where]  # 1-based group of each value
    edges = np.r_[np.flatnonzero(first), len(values)]
    ranks: np.ndarray = 0.5 * (edges[group - 1] + 1 + edges[group])
    return ranks


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive scores below a negative), ties counting half: how well a low value tells the positives."""
    ranks = average_ranks(np.r_[-positive, -negative])
    n, m = len(positive), len(negative)
    return float((ranks[:n].sum() - n * (n + 1) / 2) / (n * m))


def summary(name: str, x: np.ndarray, kind: np.ndarray, names: list[str]) -> None:
    """Per number: its median for answerable hits and misses and each unanswerable kind, and how well a low
    value tells held-out requests from hits (AUC; below 0.5, a high value does)."""
    hit = x[:, -1] == 1
    groups = {
        "hit": (kind == "answerable") & hit,
        "miss": (kind == "answerable") & ~hit,
        "held-out": kind == "held-out",
        "irrelevance": kind == "irrelevance",
        "live irr.": kind == "live_irrelevance",
    }
    print(f"\n{name}: answerable hit@1 {hit[kind == 'answerable'].mean():.3f}\n")
    print("| number | " + " | ".join(groups) + " | AUC held-out vs hit |")
    print("|---|" + "---:|" * (len(groups) + 1))
    for j, feature in enumerate(names[:-1]):
        cells = [f"{np.median(x[m, j]):.3f}" for m in groups.values()]
        separation = auc(x[groups["held-out"], j], x[groups["hit"], j])
        print(f"| {feature} | " + " | ".join(cells) + f" | {separation:.3f} |")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write each catalogue's numbers there (.npz)")
    parser.add_argument("--learned", action="store_true", help="after learning each calibration split (BFCL sets)")
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    irrelevant = load(HERE / "data" / "bfcl_irrelevance" / "queries.jsonl")
    sets = {name: data_set(name) for name in SETS} | {"everyday": await everyday_set()}
    names = [*NAMES[:-1], *LEARNED, "hit"] if args.learned else NAMES
    for name, data in sets.items():
        if args.learned and name == "everyday":  # too few requests to learn from (bench/unanswerable.py)
            continue
        x, kind = dump_learned(data, irrelevant, embedder) if args.learned else dump(data, irrelevant, embedder)
        summary(name, x, kind, names)
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
            np.savez(args.out / f"{name}.npz", x=x, names=np.array(names), kind=kind)


if __name__ == "__main__":
    logging.getLogger("client").setLevel(logging.ERROR)
    asyncio.run(main())
