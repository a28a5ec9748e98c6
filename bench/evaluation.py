"""Off-policy evaluation against a known truth: do the IPS, SNIPS and DR intervals of
`toolwise inspect evaluate` (rl/evaluation.py) cover a candidate's true mean reward?

A simulation over a real catalogue (bench/data/bfcl_live: the `--tools` tools most often right, the
requests whose right tools are all among them), with synthetic reward probabilities: a call succeeds
with probability 0.85 when the tool is one of the request's right tools, else with a per-tool
probability drawn once in [0.02, 0.3]; reward +10 on success, −5 on failure, −0.05 for its 0.5 s
latency (toolwise's reward code, no fast bonus). So the mean reward μ(x, a) of every (request, tool)
is known exactly.

Logging policy, with known propensities: ε-greedy (ε = `--epsilon`) around toolwise's deterministic
baseline (the lexical prior's best tool), uniform over the catalogue when exploring. A log of
`--decisions` requests drawn uniformly from the pool. A frozen candidate (a toolwise policy with
ε = 0) learns the first half of the log as toolwise's start-up replay would, then is evaluated on the
second half; its true value is exact: the mean over the pool of μ(x, its pick) (deterministic). A
learning candidate is replayed over the whole log (Li et al. 2011, importance-weighted); its truth is
the exact mean reward μ(x_t, pick_t) of the picks it made along that replay.
Repeated over `--seeds` logs; printed per candidate: the truth, each estimator's mean estimate, mean
interval half-width, mean absolute error and coverage of the truth by the 95% interval, next to the
naive reference (the logged policy's own mean reward on the same decisions) in the same run.

    python bench/evaluation.py [--seeds 50] [--decisions 4000] [--tools 20] [--epsilon 0.3]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toolwise.rl import Decision, Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.evaluation import Candidate, Evaluation, Logged, OffPolicyReplay, candidate_learner
from toolwise.rl.reward import RewardWeights, compute_reward

DATA = Path(__file__).parent / "data" / "bfcl_live"
LATENCY_S = 0.5
RIGHT = 0.85
CANDIDATES = [
    Candidate("outcome", epsilon=0.0, learning=False),  # the default policy
    Candidate("outcome", epsilon=0.05),
    Candidate("choice", epsilon=0.0, learning=False),  # the agent model alone (the default until issue 34)
    Candidate("choice", epsilon=0.05),
    Candidate("linucb", epsilon=0.0, learning=False),
    Candidate("semantic", epsilon=0.0, learning=False),
    Candidate("semantic", epsilon=0.0, prior_weight=0.2, learning=False),
    Candidate("semantic", epsilon=0.05),  # learning while replayed (Li et al.): the truth is its own picks'
]


@dataclass(frozen=True, slots=True)
class World:
    tools: list[ToolDoc]
    queries: list[str]
    means: np.ndarray  # (queries, tools): exact mean reward of each pair

    def mean(self, query: int, tool: str) -> float:
        return float(self.means[query, self.index[tool]])

    @property
    def index(self) -> dict[str, int]:
        return {t.name: i for i, t in enumerate(self.tools)}


def world(k: int, rng: np.random.Generator) -> World:
    queries = [json.loads(line) for line in (DATA / "queries.jsonl").open()]
    counts: dict[str, int] = {}
    for q in queries:
        for t in q["tools"]:
            counts[t] = counts.get(t, 0) + 1
    top = sorted(counts, key=lambda t: (-counts[t], t))[:k]
    described = {d["name"]: d["description"] for d in map(json.loads, (DATA / "tools.jsonl").open())}
    tools = [ToolDoc(name, described.get(name, "")) for name in top]
    pool = [q for q in queries if set(q["tools"]) <= set(top)]
    base = rng.uniform(0.02, 0.3, size=k)
    weights = RewardWeights()
    success, failure = (compute_reward(weights, success=s, latency_s=LATENCY_S) for s in (True, False))
    p = np.tile(base, (len(pool), 1))
    for i, q in enumerate(pool):
        for t in q["tools"]:
            p[i, top.index(t)] = RIGHT
    return World(tools, [q["query"] for q in pool], p * success + (1 - p) * failure)


def log(w: World, n: int, epsilon: float, rng: np.random.Generator) -> list[tuple[int, Logged]]:
    """n decisions of the ε-greedy logging policy, with their exact propensities and drawn rewards."""
    baseline = Learner(LearnerConfig(), w.tools)
    greedy = [baseline.recommend(q, rng, baseline=True, top_k=1).chosen for q in w.queries]
    names, k = [t.name for t in w.tools], len(w.tools)
    weights = RewardWeights()
    rows = []
    for _ in range(n):
        x = int(rng.integers(len(w.queries)))
        tool = names[int(rng.integers(k))] if rng.random() < epsilon else greedy[x]
        propensity = epsilon / k + (1 - epsilon) * (tool == greedy[x])
        success_p = (w.mean(x, tool) - compute_reward(weights, success=False, latency_s=LATENCY_S)) / 15.0
        success = bool(rng.random() < success_p)
        reward = compute_reward(weights, success=success, latency_s=LATENCY_S)
        rows.append((x, Logged(Step(tool, success, LATENCY_S * 1000, query=w.queries[x]), reward, propensity, True)))
    return rows


def truth(w: World, replay: OffPolicyReplay) -> float:
    """The frozen candidate's exact value: μ of its (deterministic) pick, averaged over the pool."""
    learner, rng = copy.deepcopy(replay.learner), np.random.default_rng(0)
    return float(np.mean([w.mean(i, learner.recommend(q, rng, top_k=1).chosen) for i, q in enumerate(w.queries)]))


def run(w: World, candidate: Candidate, rows: list[tuple[int, Logged]], seed: int) -> tuple[float, Evaluation]:
    """The candidate's estimates and its true value: frozen, the exact value of its policy after the
    first half; learning, the exact mean reward μ(x_t, pick_t) of the picks it made along the replay
    (E[μ(x_t, pick_t) | past] is the value of its policy at t, which is what the estimators average)."""
    rng = np.random.default_rng(seed)
    replay = OffPolicyReplay(candidate_learner(candidate, LearnerConfig(), w.tools, None), candidate, rng)
    if candidate.learning:
        picks: list[str] = []
        recommend = replay.learner.recommend

        def recording(*args: Any, **kwargs: Any) -> Decision:
            decision = recommend(*args, **kwargs)
            picks.append(decision.chosen)
            return decision

        replay.learner.recommend = recording  # type: ignore[method-assign]  # the bench watches the picks
        for _, logged in rows:
            replay.step(logged)
        value = float(np.mean([w.mean(x, pick) for (x, _), pick in zip(rows, picks, strict=True)]))
        return value, replay.result()
    half = len(rows) // 2
    for _, logged in rows[:half]:
        replay.warm(logged)
    value = truth(w, replay)
    for _, logged in rows[half:]:
        replay.step(logged)
    return value, replay.result()


@dataclass(slots=True)
class Tally:
    truths: list[float] = field(default_factory=list)
    found: dict[str, list[tuple[float, float, float]]] = field(default_factory=dict)  # estimate, low, high

    def add(self, value: float, evaluation: Evaluation) -> None:
        self.truths.append(value)
        e = evaluation.estimates
        for name, i in (("naive (logged)", e.logged), ("IPS", e.ips), ("SNIPS", e.snips), ("DR", e.dr)):
            self.found.setdefault(name, []).append((i.estimate, i.low, i.high))

    def lines(self) -> list[str]:
        t = np.array(self.truths)
        out = [f"  true value {t.mean():7.3f} (mean over seeds; sd {t.std():.3f})"]
        out.append(f"  {'estimator':<15} {'mean est.':>9} {'half-width':>10} {'mean |err|':>10} {'coverage':>9}")
        for name, values in self.found.items():
            a = np.array(values)
            covered = np.mean((a[:, 1] <= t) & (t <= a[:, 2]))
            err = np.mean(np.abs(a[:, 0] - t))
            half = np.mean((a[:, 2] - a[:, 1]) / 2)
            out.append(f"  {name:<15} {a[:, 0].mean():9.3f} {half:10.3f} {err:10.3f} {covered:9.0%}")
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=50)
    parser.add_argument("--decisions", type=int, default=4000)
    parser.add_argument("--tools", type=int, default=20)
    parser.add_argument("--epsilon", type=float, default=0.3)
    args = parser.parse_args()
    w = world(args.tools, np.random.default_rng(12345))
    print(
        f"{len(w.tools)} tools, {len(w.queries)} requests of bfcl_live; logging ε-greedy ε={args.epsilon} around the "
        f"lexical prior; {args.decisions} decisions a log (half learned, half evaluated), {args.seeds} seeds; "
        f"95% intervals: normal approximation, empirical variance (SNIPS: delta method)",
        flush=True,
    )
    tallies = {c: Tally() for c in CANDIDATES}
    started = time.perf_counter()
    for seed in range(args.seeds):
        rows = log(w, args.decisions, args.epsilon, np.random.default_rng(seed))
        for candidate in CANDIDATES:
            value, evaluation = run(w, candidate, rows, seed)
            tallies[candidate].add(value, evaluation)
            if seed == 0:
                e = evaluation.estimates
                shown = ", ".join(
                    f"{n} {i.estimate:.2f} [{i.low:.2f}, {i.high:.2f}]"
                    for n, i in (("IPS", e.ips), ("SNIPS", e.snips), ("DR", e.dr), ("logged", e.logged))
                )
                print(
                    f"seed 0, {candidate.describe()}: truth {value:.2f}; {shown}; {e.matches} of {e.n} match, "
                    f"ESS {e.ess:.0f}",
                    flush=True,
                )
    for candidate, tally in tallies.items():
        print(f"\n{candidate.describe()}:")
        print("\n".join(tally.lines()))
    print(f"\n{time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
