"""bench/outcomes.py's world without MCP: the same imperfect agent's stream through a `Learner` driven
directly (recommend, learn the call, its rating, its session's end), as the server would, in seconds a run
instead of minutes, deterministic under a seed. For trying a change of the policy before the MCP bench
confirms it; only toolwise's counterfactual and live arms and the outcome ridge run (no choice arms).
Figures are close to bench/outcomes.py's, not identical (no store, tool names as the data set has them). The
world is its (bench/reference_embedding.py), whatever embedding the learner runs.

    python bench/outcomes_direct.py                            # BFCL live, 60% and 80%, seeds 0 and 1
    python bench/outcomes_direct.py --accuracy 0.8 --seeds 1   # one run
    python bench/outcomes_direct.py --accuracy 0.8 --why       # and why its top-1 missed each confusion
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from imperfect_agent import Stream, load, simulate
from outcome_report import WINDOW, WITHIN, Arm, report
from outcome_why import explain, listen
from outcomes import World, ridge_arms, world
from reference_embedding import ReferenceEmbedding

from toolwise.config import Settings
from toolwise.learning.core import learner_config
from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.rl import Learner, Step, ToolDoc
from toolwise.rl.steps import FIT

HERE = Path(__file__).resolve().parent
LATENCY_MS = 5.0  # every call alike: the reward's latency term says nothing here


def learner(w: World, embedder: WordLlamaEmbedder, policy: str) -> Learner:
    """A fresh learner configured as the server's default settings configure it (`learner_config`)."""
    tools, _ = load(w.path)
    docs = [
        ToolDoc(
            t["name"],
            t.get("description") or "",
            tool_document(t["name"], None, t.get("description"), t.get("parameters")),
        )
        for t in tools
    ]
    return Learner(learner_config(Settings(policy=policy)), docs, embedder)


def direct_arm(learn: Learner, stream: Stream, follow: float | None, seed: int) -> Arm:
    """bench/outcomes.py's `toolwise_arm` on the learner itself."""
    rng = np.random.default_rng(seed)
    top, confidence, p_agent, called = [], [], [], []
    for i in range(len(stream.order)):
        session = f"conversation-{i}"
        query = stream.request(i).query
        first = learn.recommend(query, rng, top_k=1).ranked[0]
        top.append(first.tool)
        confidence.append(first.expected)
        p_agent.append(np.nan if first.p_agent is None else first.p_agent)
        pick = top[-1] if follow is not None and confidence[-1] >= follow else stream.choice[i]
        called.append(pick)
        outcome = stream.outcome(i, pick)
        step = Step(
            pick,
            outcome.worked,
            LATENCY_MS,
            query=query,
            session=session,
            fault=None if outcome.worked else FIT,
            passed_over=None if pick == top[-1] else top[-1],
            followed=pick == top[-1],
        )
        reward = learn.learn(step, rng).reward
        if outcome.rating is not None:
            reward = learn.observe_rating(replace(step, rating=outcome.rating), rng, reward).reward
        learn.end_episode(step, reward, rng)
    return Arm(top, np.array(confidence), np.array(p_agent), called)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "bfcl_live")
    parser.add_argument("--accuracy", default="0.6,0.8", help="the agent's accuracies, comma-separated")
    parser.add_argument("--recurring", type=float, default=0.6)
    parser.add_argument("--requests", type=int, default=2_500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--policy", default=Settings.model_fields["policy"].default)
    parser.add_argument("--follow", type=float, default=0.5)
    parser.add_argument(
        "--why", action="store_true", help="per confused request toolwise's top-1 missed, the gate that kept it"
    )
    args = parser.parse_args()
    embedder, reference = WordLlamaEmbedder(), ReferenceEmbedding()
    rows = []
    for seed in range(args.seed, args.seed + args.seeds):
        w = world(args.data, 0, seed, reference, "query", "hard")
        for accuracy in (float(a) for a in args.accuracy.split(",")):
            started = time.perf_counter()
            stream = simulate(w.pool, w.trouble, accuracy, args.recurring, args.requests, seed, w.hardness)
            counterfactual = learner(w, embedder, args.policy)
            probes = listen(counterfactual) if args.why else []
            arms = {
                f"toolwise ({args.policy})": (
                    direct_arm(counterfactual, stream, None, seed),
                    direct_arm(learner(w, embedder, args.policy), stream, args.follow, seed),
                ),
                "outcome ridge (reference)": ridge_arms(stream, w.names, w.queries),
            }
            label = f"{args.data.name}, agent {accuracy:.0%}, seed {seed}"
            rows.append(report(label, stream, accuracy, arms))
            if args.why:  # the window the target is read in
                explain(counterfactual, probes, stream, w.trouble, WITHIN - WINDOW, WITHIN)
            print(f"  {label}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    print(f"\nissue 34's targets, toolwise ({args.policy}), direct:")
    print("\n".join(v.row() for v in rows))


if __name__ == "__main__":
    main()
