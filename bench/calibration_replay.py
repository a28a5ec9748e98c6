"""Issue 34's ECE screened offline: other maps of p_agent to the confidence's prior mean, replayed on a recorded run.

bench/outcomes_direct.py's counterfactual arm is run once per seed and accuracy (cached under --cache) with
the outcome policy listened to: each call its prior's calibration learns (p_agent, fit, and the called tool's
query–tool cosine, the choice model's first feature) and each recommendation's top-1 (p_agent, evidence,
P(works), the prior mean m it was read with, its cosine). A map tried instead is learned on the same calls, and
the top-1's confidence is the same posterior read with its mean m': p + s₀(m' − m)/(s₀ + evidence) (a top-1 put
first by `replacement`, whose mean is its fit across requests, as recorded). The verdicts, the ranking and the
confusions are the recorded ones: only the confidence reported, so its ECE, changes; the gains move through
the live arm's ≥ 0.5 rule, which this does not run (`--gain` prints a proxy, see `gain_proxy`). The run
reports the verdicts' posterior (the held map's), whose replay is checked against it at each run; the confidence
the code reports is the `cosine0.5` map's with `--held-under 0.5` (rl/policies/outcome.py, `reported_of`;
outcomes_direct measures it live).

    python bench/calibration_replay.py --seeds 8                           # BFCL live, 60% and 80%
    python bench/calibration_replay.py --data bench/data/nestful --seeds 8 --maps held,free
    python bench/calibration_replay.py --seeds 8 --held-under 0.5   # no confidence lifted across the ≥ 0.5 rule
"""

from __future__ import annotations

import argparse
import math
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from imperfect_agent import simulate
from numpy.typing import NDArray
from outcome_report import ECE_TARGET, LAST, reliability
from outcomes import world
from outcomes_direct import direct_arm, learner
from reference_embedding import ReferenceEmbedding

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.calibration import logit_of
from toolwise.rl.outcomes import OutcomeConfig
from toolwise.rl.policies.outcome import OutcomeModel

HERE = Path(__file__).resolve().parent
FLOOR = -1e9  # a weight with no floor
S0 = OutcomeConfig().prior_strength  # calls the prior mean counts as (the server's default)


@dataclass
class Recording:
    """One counterfactual run as the replay reads it, in the order it happened."""

    calls: list[tuple[float, float, float]] = field(default_factory=list)  # (p_agent, fit, cosine); fit: change
    revised: list[bool] = field(default_factory=list)  # per entry of `calls`: a rating's revision
    at: list[int] = field(default_factory=list)  # per top-1: how many entries of `calls` came before it
    top: list[tuple[float, float, float, float, float]] = field(default_factory=list)  # p_agent, E, p, m, cosine
    replaced: list[bool] = field(default_factory=list)
    works: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    top_hit: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    agent_hit: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    replaced_arm: int = -1  # the arm `replacement` put first at the latest select (-1: none)


def record(policy: OutcomeModel, rec: Recording) -> Callable[[Any, int], None]:
    """Listens to the policy's calibration and learning; returns what to call with each recommendation."""
    calibration, cosine = policy.calibration, [math.nan]
    learn_many, revise, learn_one = calibration.learn_many, calibration.revise, policy.learn_one
    select, replacement = policy.select, policy.replacement
    cosines: dict[int, float] = {}  # each candidate's cosine at the last select

    def on_learn_many(p_agents: list[float], fits: list[float], cosines: list[float] | None = None) -> None:
        rec.calls += [(p, y, cosine[0]) for p, y in zip(p_agents, fits, strict=True)]
        rec.revised += [False] * len(p_agents)
        cosine[0] = math.nan  # a run learned at once (`learn_many`) has none
        learn_many(p_agents, fits, cosines)

    def on_revise(p_agent: float, change: float, cosine_of: float = 0.0) -> None:
        rec.calls.append((p_agent, change, cosine[0]))
        rec.revised.append(True)
        revise(p_agent, change, cosine_of)

    def on_learn_one(lesson: Any, rng: Any) -> Any:
        at = np.flatnonzero(lesson.candidates == lesson.arm) if lesson.candidates is not None else np.zeros(0, int)
        cosine[0] = float(lesson.rows[at[0], 0]) if len(at) else math.nan
        return learn_one(lesson, rng)

    def on_select(context: Any, arms: Any, inputs: Any, rng: Any) -> Any:
        rec.replaced_arm = -1
        selection = select(context, arms, inputs, rng)
        cosines.clear()
        cosines.update(zip(arms.tolist(), inputs[:, 0].tolist(), strict=True))
        return selection

    def on_replacement(*args: Any) -> Any:
        order = replacement(*args)
        rec.replaced_arm = int(args[0][order[0]]) if int(order[0]) != int(args[4][0]) else -1
        return order

    # listeners that call through: the same signatures, typed loosely (as bench/outcome_why.py's)
    calibration.learn_many = on_learn_many  # type: ignore[method-assign,assignment]
    calibration.revise = on_revise  # type: ignore[method-assign,assignment]
    policy.learn_one = on_learn_one  # type: ignore[method-assign]
    policy.select = on_select  # type: ignore[method-assign]
    policy.replacement = on_replacement  # type: ignore[method-assign,assignment]

    def on_top(first: Any, arm: int) -> None:
        if policy.health:
            raise ValueError("a tool broke in this run: the replay does not read the health factor")
        p_agent = float(first.p_agent)
        m = float(calibration.mean(np.array([p_agent]))[0])
        rec.at.append(len(rec.calls))
        rec.top.append((p_agent, float(first.evidence), float(first.expected), m, cosines.get(arm, math.nan)))
        rec.replaced.append(rec.replaced_arm == arm)

    return on_top


def run(
    data: Path, seed: int, accuracy: float, embedder: WordLlamaEmbedder, reference: ReferenceEmbedding
) -> Recording:
    w = world(data, 0, seed, reference, "query", "hard")
    stream = simulate(w.pool, w.trouble, accuracy, 0.6, 2_500, seed, w.hardness)
    learn = learner(w, embedder, "outcome")
    if not isinstance(learn.policy, OutcomeModel):
        raise TypeError(f"the replay reads the outcome policy, not {learn.policy.name!r}")
    # the confidence reported is the verdicts' posterior, as the maps replayed read it (not the cosine map's)
    learn.policy.config = replace(learn.policy.config, held_under=math.inf)
    rec = Recording()
    on_top, recommend = record(learn.policy, rec), learn.recommend

    def on_recommend(*args: Any, **kwargs: Any) -> Any:
        decision = recommend(*args, **kwargs)
        first = decision.ranked[0]
        on_top(first, learn.index.tools.intern(first.tool))
        return decision

    learn.recommend = on_recommend  # type: ignore[method-assign]
    arm = direct_arm(learn, stream, None, seed)
    rec.works, rec.top_hit = stream.works(arm.top), stream.hits(arm.top)
    rec.agent_hit = stream.hits(list(stream.choice))
    return rec


class Map:
    """σ(w · φ(logit p_agent, cosine)), learned as rl/calibration.py's `Calibration` learns (AdaGrad on the
    log-loss, each weight held at its floor, 0.5 until `start` outcomes' worth have been seen)."""

    def __init__(
        self, phi: Callable[[float, float], NDArray[np.float64]], start_weights: list[float], floors: list[float]
    ):
        self.phi, self.w, self.floors = phi, np.array(start_weights), np.array(floors)
        self.steps, self.seen = np.zeros(len(start_weights)), 0

    def mean(self, p: float, cosine: float) -> float:
        if not self.seen:
            return 0.5
        m = 1.0 / (1.0 + math.exp(-float(self.w @ self.phi(logit_of(p), cosine))))
        return (self.seen * m + 20.0 * 0.5) / (self.seen + 20.0)

    def learn(self, p: float, fit: float, cosine: float, revised: bool) -> None:
        f = self.phi(logit_of(p), cosine)
        if revised:  # the label's change, the step sizes as they were
            self.w = np.maximum(self.w + 0.05 * fit * f / np.sqrt(1.0 + self.steps), self.floors)
            return
        g = (fit - 1.0 / (1.0 + math.exp(-float(self.w @ f)))) * f
        self.steps += g * g
        self.w = np.maximum(self.w + 0.05 * g / np.sqrt(1.0 + self.steps), self.floors)
        self.seen += 1


@dataclass
class Blend:
    """(1 − share)·the first map's mean + share·the second's."""

    first: Map
    second: Map
    share: float

    def mean(self, p: float, cosine: float) -> float:
        return (1.0 - self.share) * self.first.mean(p, cosine) + self.share * self.second.mean(p, cosine)

    def learn(self, p: float, fit: float, cosine: float, revised: bool) -> None:
        self.first.learn(p, fit, cosine, revised)
        self.second.learn(p, fit, cosine, revised)


def slope(floor: float) -> Callable[[], Map]:
    return lambda: Map(lambda z, _: np.array([1.0, z]), [0.0, 1.0], [FLOOR, floor])


def hinge(knot: float) -> Callable[[], Map]:
    """Two pieces in logit p_agent: the slope below `knot` held ≥ 1, above it free (≥ 0)."""
    return lambda: Map(
        lambda z, _: np.array([1.0, min(z, knot), max(z - knot, 0.0)]), [0.0, 1.0, 1.0], [FLOOR, 1.0, 0.0]
    )


def with_cosine(floor: float) -> Callable[[], Map]:
    """The query–tool cosine as a second input (its weight free), the slope held ≥ `floor`."""
    return lambda: Map(
        lambda z, c: np.array([1.0, z, 0.0 if math.isnan(c) else c]), [0.0, 1.0, 0.0], [FLOOR, floor, FLOOR]
    )


MAPS: dict[str, Callable[[], Map | Blend]] = {
    "held": slope(1.0),  # the code's (rl/policies/outcome.py: min_slope=1.0)
    "free": slope(0.0),
    "slope0.5": slope(0.5),
    "hinge-1": hinge(-1.0),
    "hinge0": hinge(0.0),
    "hinge1": hinge(1.0),
    "blend0.2": lambda: Blend(slope(1.0)(), slope(0.0)(), 0.2),
    "mean": lambda: Blend(slope(1.0)(), slope(0.0)(), 0.5),  # f400716's
    "cosine": with_cosine(1.0),
    "cosine0.5": with_cosine(0.5),
    "cosine0.4": with_cosine(0.4),
    "cosine0.3": with_cosine(0.3),
}


def replay(rec: Recording, make: Callable[[], Map | Blend]) -> NDArray[np.float64]:
    """The top-1s' confidences under another map."""
    alt, done, out = make(), 0, []
    for at, (p_agent, evidence, p, m, cosine), replaced in zip(rec.at, rec.top, rec.replaced, strict=True):
        for (q, fit, c), revised in zip(rec.calls[done:at], rec.revised[done:at], strict=True):
            alt.learn(q, fit, c, revised)
        done = at
        out.append(p if replaced else p + S0 * (alt.mean(p_agent, cosine) - m) / (S0 + evidence))
    confidence: NDArray[np.float64] = np.clip(np.array(out), 0.0, 1.0)
    return confidence


def gain_proxy(rec: Recording, confidence: NDArray[np.float64]) -> float:
    """Over the last LAST requests of the counterfactual stream: how much more often an agent right where
    it was would be right following the top-1 at confidence ≥ 0.5 than alone (points). The live arm's
    stream differs (what it learns follows what it calls), so a proxy for the change, not the gain."""
    follow = confidence[-LAST:] >= 0.5
    return float(100 * np.mean(np.where(follow, rec.top_hit[-LAST:], rec.agent_hit[-LAST:]) - rec.agent_hit[-LAST:]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "bfcl_live")
    parser.add_argument("--accuracy", default="0.6,0.8")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--maps", default=",".join(MAPS))
    parser.add_argument("--cache", type=Path, default=Path("/tmp/toolwise-calibration-replay"))
    parser.add_argument("--gain", action="store_true", help="also the gain proxy at the ≥ 0.5 rule")
    parser.add_argument(
        "--held-under", type=float, default=0.0, help="keep the recorded confidence where it is under this (0: nowhere)"
    )
    args = parser.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    embedder: WordLlamaEmbedder | None = None
    reference: ReferenceEmbedding | None = None
    runs: dict[str, Recording] = {}
    for seed in range(args.seed, args.seed + args.seeds):
        for accuracy in (float(a) for a in args.accuracy.split(",")):
            path = args.cache / f"{args.data.name}-{seed}-{accuracy}.pkl"
            if not path.exists():
                embedder, reference = embedder or WordLlamaEmbedder(), reference or ReferenceEmbedding()
                path.write_bytes(pickle.dumps(run(args.data, seed, accuracy, embedder, reference)))
            runs[f"{accuracy:.0%} s{seed}"] = rec = pickle.loads(path.read_bytes())
            ran = replay(rec, MAPS["held"])
            recorded = np.clip(np.array([t[2] for t in rec.top]), 0.0, 1.0)
            if not np.allclose(ran, recorded, atol=1e-9):
                raise ValueError(f"{path}: the held map's replay differs from what the run reported")
    print(f"{args.data.name}: ECE of the top-1's confidence (target ≤ {ECE_TARGET}), " + " · ".join(runs))
    for name in args.maps.split(","):
        confidences = {label: replay(rec, MAPS[name]) for label, rec in runs.items()}
        for label, rec in runs.items():  # where the code's map says under --held-under, as it says
            recorded = np.clip(np.array([t[2] for t in rec.top]), 0.0, 1.0)
            confidences[label] = np.where(recorded < args.held_under, recorded, confidences[label])
        eces = [reliability(c, runs[label].works)[1] for label, c in confidences.items()]
        over = sum(e > ECE_TARGET for e in eces)
        line = f"  {name:10s} max {max(eces):.3f} ({over} over) " + " · ".join(f"{e:.3f}" for e in eces)
        if args.gain:
            line += "; gain proxy " + " · ".join(f"{gain_proxy(runs[k], c):+.1f}" for k, c in confidences.items())
        print(line)


if __name__ == "__main__":
    main()
