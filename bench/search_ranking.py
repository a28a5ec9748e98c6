"""Why search_tools ranks by the prior plus the learned residual and not by a fusion with plain
BM25: the candidates side by side, offline (the learner alone, as the server drives it, no MCP).

Same catalogue and agent as bench/discovery.py (a data set's real tools plus fillers up to 1,000; the
agent calls the right tool when the top 5 shows one, else the top pick; the call's outcome is
learned), each ranking scored zero-shot (pass 0: deterministic, nothing learned) and then online:

- plain BM25 over name, description and parameter names/descriptions (no learning: the reference);
- the prior (WordLlama cosine + 0.25 BM25 over the same documents) plus the learned residual: what
  search_tools serves;
- reciprocal-rank fusion (k = 60) of the prior's ranking and BM25's, put on the prior's scale (the
  fused order gets the prior's own sorted values, so the residual, fitted against the prior, weighs
  the same against it), plus the learned residual;
- the same fusion rescaled to [0, 1] (its best tool 1);
- the mean of the prior and BM25 (both in [0, 1]), plus the learned residual.

    python bench/search_ranking.py [--data bench/data/bfcl_live [bench/data/toollens]] [--passes 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from discovery import TOP_K, fillers
from numpy.typing import NDArray
from real_queries import DataSet

from toolwise.downstream.naming import assign
from toolwise.learning.embedding import load_embedder, tool_document
from toolwise.rl import Learner, Step, ToolDoc
from toolwise.rl.policies.base import baseline_selection

HERE = Path(__file__).resolve().parent
RRF_K = 60.0  # the constant of Cormack et al. (2009), used as is
Scores = NDArray[np.float64]


def rrf(*rankings: Scores) -> Scores:
    """Reciprocal-rank fusion: Σ 1/(k + rank) over the rankings in which a tool scores above 0."""
    out = np.zeros(len(rankings[0]))
    for scores in rankings:
        rank = np.empty(len(scores))
        rank[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
        out += np.where(scores > 0, 1.0 / (RRF_K + rank), 0.0)
    return out


def on_scale_of(order: Scores, scale: Scores) -> Scores:
    """`scale`'s values, largest first, given out in the order of `order`."""
    out = np.empty(len(scale))
    out[np.argsort(-order, kind="stable")] = np.sort(scale)[::-1]
    return out


def rrf_on_prior_scale(prior: Scores, bm25: Scores) -> Scores:
    return on_scale_of(rrf(prior, bm25), prior)


def rrf_rescaled(prior: Scores, bm25: Scores) -> Scores:
    fused = rrf(prior, bm25)
    return fused / max(float(fused.max()), 1e-12)


RANKINGS: dict[str, tuple[bool, Callable[[Scores, Scores], Scores]]] = {  # name: (learns, scores(prior, bm25))
    "plain BM25 (reference)": (False, lambda prior, bm25: bm25),
    "prior + residual (search_tools)": (True, lambda prior, bm25: prior),
    "RRF(prior, BM25) on the prior's scale + residual": (True, rrf_on_prior_scale),
    "RRF(prior, BM25) / max + residual": (True, rrf_rescaled),
    "(prior + BM25) / 2 + residual": (True, lambda prior, bm25: (prior + bm25) / 2),
}


def run(data: DataSet, name: str, passes: int, seed: int) -> list[tuple[float, float]]:
    """(recall@1, recall@5) per pass, pass 0 zero-shot."""
    learns, scores_of = RANKINGS[name]
    rng = np.random.default_rng(seed)
    tools = data.tools + fillers(1_000 - len(data.tools), {t["name"] for t in data.tools}, rng)
    public = assign([("cat", t["name"]) for t in tools])  # as the server names them (collisions get -2)
    own = {public["cat", t["name"]]: t["name"] for t in tools}
    docs = [ToolDoc(p, t.get("description", ""), tool_document(p, None, t.get("description"), t.get("parameters")))
            for p, t in zip(own, tools, strict=True)]  # fmt: skip
    learner = Learner(tools=docs, embedder=load_embedder("wordllama"))
    names, arms = learner.index.tools.names, learner.index.active
    out = []
    for p in range(passes + 1 if learns else 1):
        at1 = at5 = 0
        for i in rng.permutation(len(data.requests)):
            query, right = data.requests[i].query[:10_000], data.requests[i].right
            scores = scores_of(learner.features.prior(query, None), learner.index.lexical.scores(query)).take(arms)
            context = learner.encode(query, None, 0)
            selection = learner.policy.select(context, arms, scores, rng) if p else baseline_selection(arms, scores)
            top = [names[a] for a in selection.ranked[:TOP_K]]
            at1 += own[top[0]] in right
            at5 += any(own[t] in right for t in top)
            if p:
                pick = next((t for t in top if own[t] in right), top[0])
                learner.learn(Step(pick, own[pick] in right, 1.0, query=query, terminal=True), rng)
        out.append((at1 / len(data.requests), at5 / len(data.requests)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[HERE / "data" / "bfcl_live"])
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    for data in [DataSet.load(path) for path in args.data]:
        started = time.perf_counter()
        print(f"\n{data.path.name}: {len(data.requests)} requests, 1,000 tools; recall@1 / recall@5 per pass\n")
        print("| ranking | zero-shot | " + " | ".join(f"pass {p}" for p in range(1, args.passes + 1)) + " |")
        print("|---|---|" + "---|" * args.passes)
        for name in RANKINGS:
            cells = [f"{100 * a:.1f}% / {100 * b:.1f}%" for a, b in run(data, name, args.passes, args.seed)]
            print(f"| {name} | " + " | ".join(cells + ["—"] * (args.passes + 1 - len(cells))) + " |")
        print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
