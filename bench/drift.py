"""Exploration that follows the rewards, on a non-stationary replay of real requests: toolwise picks
the tool for each BFCL live request (the call succeeds only on a right tool), and half-way through,
the three tools asked for most break while a substitute of each (the catalogue's tool most similar
to it: "the new version") starts serving their requests. Printed: hit rate before and after the
change, on the affected requests and overall, and the misses on affected requests after the change
(regret against an oracle that knows the change), for toolwise with its adaptive ε and drift guard
(the default), toolwise with ε fixed at 0 and at 0.05 (no drift guard), and two non-stationary bandit
references over the same prior: sliding-window UCB and discounted UCB (Garivier & Moulines 2011) per
tool, in the same run, several seeds. In-process, the learner API (no MCP surface: the figure is the
learner's).

    python bench/drift.py [--seeds 3] [--passes 4]
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.exploration import ExplorationConfig

HERE = Path(__file__).resolve().parent
BROKEN = 3


@dataclass(frozen=True)
class World:
    docs: list[ToolDoc]
    requests: list[tuple[str, str]]  # (query, its right tool before the change)
    substitute: dict[str, str]  # broken tool → the tool serving its requests after the change


def world(embedder: WordLlamaEmbedder) -> World:
    data = HERE / "data" / "bfcl_live"
    tools = [json.loads(line) for line in (data / "tools.jsonl").read_text().splitlines()]
    docs = [
        ToolDoc(t["name"], t["description"], tool_document(t["name"], None, t["description"], t["parameters"]))
        for t in tools
    ]
    rows = [json.loads(line) for line in (data / "queries.jsonl").read_text().splitlines()]
    requests = [(r["query"], r["tools"][0]) for r in rows if len(r["tools"]) == 1]
    counts = Counter(tool for _, tool in requests)
    requests = [(q, t) for q, t in requests if counts[t] >= 4]  # tools asked for again and again
    vectors = embedder.embed([d.document for d in docs])
    index = {d.name: i for i, d in enumerate(docs)}
    substitute = {}
    for tool, _ in counts.most_common(BROKEN):
        similarity = vectors @ vectors[index[tool]]
        similarity[index[tool]] = -1
        substitute[tool] = docs[int(np.argmax(similarity))].name
    return World(docs, requests, substitute)


def right(world: World, tool: str, changed: bool) -> str:
    return world.substitute.get(tool, tool) if changed else tool


class WindowUCB:
    """The prior's ranking corrected per tool by a UCB on its recent rewards: a sliding window of its
    last `window` calls, or discounted sums (`discount`)."""

    def __init__(
        self, prior: Learner, window: int | None = None, discount: float | None = None, c: float = 0.5
    ) -> None:
        self.prior, self.window, self.discount, self.c = prior, window, discount, c
        self.history: dict[str, list[float]] = {}
        self.sums: dict[str, list[float]] = {}  # tool → [discounted reward sum, discounted count]
        self.total = 0.0

    def pick(self, query: str) -> str:
        scores = self.prior.features.prior(query, None)[: len(self.prior.index.active)]
        names = self.prior.index.tools.names
        best, value = names[0], -math.inf
        for i in np.argsort(-scores)[:10].tolist():
            mean, n = self._stats(names[i])
            bonus = self.c * math.sqrt(math.log(max(self.total, 2.0)) / n) if n else 1.0
            score = float(scores[i]) + (mean - 0.5 if n else 0.0) + bonus
            if score > value:
                best, value = names[i], score
        return best

    def _stats(self, tool: str) -> tuple[float, float]:
        if self.window is not None:
            seen = self.history.get(tool, [])[-self.window :]
            return (sum(seen) / len(seen), float(len(seen))) if seen else (0.0, 0.0)
        s, n = self.sums.get(tool, [0.0, 0.0])
        return (s / n, n) if n > 1e-9 else (0.0, 0.0)

    def learn(self, tool: str, reward: float) -> None:
        if self.window is not None:
            self.history.setdefault(tool, []).append(reward)
            self.total = min(self.total + 1, float(self.window * 10))
            return
        assert self.discount is not None
        for stats in self.sums.values():
            stats[0] *= self.discount
            stats[1] *= self.discount
        s = self.sums.setdefault(tool, [0.0, 0.0])
        s[0] += reward
        s[1] += 1.0
        self.total = self.total * self.discount + 1.0


def run(world: World, embedder: WordLlamaEmbedder, method: str, seed: int, passes: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    stream = [world.requests[i] for _ in range(passes) for i in rng.permutation(len(world.requests))]
    change = len(stream) // 2
    exploration = {
        "toolwise (adaptive ε, drift guard)": ExplorationConfig(),
        "toolwise, ε fixed 0": ExplorationConfig(adaptive=False, drift=False),
        "toolwise, ε fixed 0.05": ExplorationConfig(adaptive=False, drift=False, epsilon_min=0.05, epsilon_max=0.05),
    }.get(method)
    learner = Learner(LearnerConfig(exploration=exploration or ExplorationConfig()), world.docs, embedder)
    reference = None
    if method == "sliding-window UCB (200)":
        reference = WindowUCB(learner, window=200)
    elif method == "discounted UCB (0.99)":
        reference = WindowUCB(learner, discount=0.99)
    hits, affected = [], []
    for i, (query, tool) in enumerate(stream):
        truth = right(world, tool, i >= change)
        chosen = reference.pick(query) if reference is not None else learner.recommend(query, rng, top_k=1).chosen
        hit = chosen == truth
        hits.append(hit)
        affected.append(tool in world.substitute)
        if reference is not None:
            reference.learn(chosen, float(hit))
        else:
            learner.learn(Step(chosen, hit, 100.0, query=query), rng)
    h, a = np.array(hits, float), np.array(affected)
    after = np.arange(len(h)) >= change
    first = after & (np.arange(len(h)) < change + 300)
    return {
        "before": h[~after].mean(),
        "after: affected, first 300": h[first & a].mean(),
        "after: affected, all": h[after & a].mean(),
        "after: all": h[after].mean(),
        "misses on affected after": float((1 - h[after & a]).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=4)
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    w = world(embedder)
    print(
        f"bfcl_live, {len(w.requests)} requests of tools asked for ≥ 4 times × {args.passes} passes; half-way, "
        + ", ".join(f"{t} breaks ({s} serves its requests)" for t, s in w.substitute.items())
    )
    methods = [
        "toolwise (adaptive ε, drift guard)",
        "toolwise, ε fixed 0",
        "toolwise, ε fixed 0.05",
        "sliding-window UCB (200)",
        "discounted UCB (0.99)",
    ]
    results = {m: [run(w, embedder, m, seed, args.passes) for seed in range(args.seeds)] for m in methods}
    columns = list(results[methods[0]][0])
    print("| method | " + " | ".join(columns) + " |")
    print("|---|" + "---|" * len(columns))
    for m in methods:
        cells = []
        for col in columns:
            values = [r[col] for r in results[m]]
            cells.append(f"{np.mean(values):.0f}" if col.startswith("misses") else f"{np.mean(values):.1%}")
        print(f"| {m} | " + " | ".join(cells) + " |")
    print(f"(mean of {args.seeds} seeds)")


if __name__ == "__main__":
    main()
