"""A missing-tools arm beside bench/unanswerable.py's (run alone): "nothing fits" once unserved requests were tried.

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
  gives up;
- `errs`: as `fails`, and it calls toolwise's first recommendation for an answerable request too: where that
  is not a right tool, the call fails (FIT) before the right tools are called and work. The other two agents
  answer every answerable request right at once, so no request a tool serves is ever seen failing there.

Then the test split is judged (no judged text was learned): unanswerable requests (right: "nothing fits")
and answerable ones (hit@1, a "nothing fits" counting as a miss). References in the same run, their
thresholds chosen on the calibration split (half learned, half judged: `learn_fold`) losing at most
TARGET_DROP points of hit@1 on each catalogue: the embedding-cosine threshold; the nearest failed
request (nothing fits when the request's best cosine to a streamed request that failed everywhere beats
its best cosine to one that worked; and its threshold version: by a margin chosen on calibration).

Then toolwise's `FailedFit` (rl/fit.py; the stream and rows: bench/unanswerable_stream.py). Figures in
docs/benchmarks.md come from

    python bench/unanswerable_missing.py                    # both agents, three catalogues (~1 minute)
    python bench/unanswerable_missing.py --fit              # refit FailedFit's defaults (prints them)
    python bench/unanswerable_missing.py --seed 1           # another fifth of the tools removed
    python bench/unanswerable_missing.py --loco             # and FailedFit fitted without each catalogue
    python bench/unanswerable_missing.py --agents fails --sets nestful   # iterating
    python bench/unanswerable_missing.py --fit --fit-agents fails,rated,errs   # fitted on errs' rows too
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
from unanswerable import SETS
from unanswerable_fitting import TARGET_DROP, logistic, probability_at
from unanswerable_stream import AGENTS, ERRS, UNANSWERABLE, MissingRow, rows_of

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.calibration import logit_of
from toolwise.rl.fit import FailedFit, FitConfig, failed_unfit_probability
from toolwise.rl.outcomes import Served

ADDED_DROP = 1.0  # points of hit@1 FailedFit may cost on each calibration list, beyond the other models' losses


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
    return failed_unfit_probability(served, r.p_works, r.cosine, failed, r.crowd)


def failed_unfit_row(r: MissingRow, failed: FailedFit) -> bool:
    """toolwise's verdict with `failed` for FailedFit (the other models' verdict is `before`; where FailedFit
    finds a fit, few failed requests near overrule it, `all_fail`'s included here)."""
    probability = failed_probability(r, failed)
    if probability is None:
        return r.before
    return probability > failed.threshold or (r.before and r.crowd >= failed.overrule_below)


def fit_failed(calibration: list[list[MissingRow]]) -> FailedFit:
    """FailedFit fitted on the rows where a best candidate failed for some request (unanswerable against
    answerable hits), its threshold the lowest costing at most ADDED_DROP points of hit@1 on each list beyond
    the other models' losses (counting those left no room on BFCL multi-turn, where they lose 2 points)."""
    within = FailedFit().within
    pooled = [r for rows in calibration for r in rows if r.unserved >= within and r.near >= 0]
    positive = [r for r in pooled if r.kind == UNANSWERABLE]
    negative = [r for r in pooled if r.kind == "answerable" and r.hit]
    rows = positive + negative
    x = np.array([[logit_of(r.p_works), r.near, r.unserved, r.cosine, math.log1p(r.crowd)] for r in rows])
    w = [round(float(v), 3) for v in logistic(x, np.r_[np.ones(len(positive)), np.zeros(len(negative))])]
    config = FailedFit(intercept=w[0], p_works=min(w[1], 0.0), near=min(w[2], 0.0), failed=max(w[3], 0.0), cosine=w[4])
    config = replace(config, crowd=max(w[5], 0.0))
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
    parser.add_argument("--agents", default=",".join((*AGENTS, ERRS)))
    parser.add_argument(
        "--fit-agents", default=",".join(AGENTS), help="whose calibration rows --fit pools (the defaults': fails,rated)"
    )
    parser.add_argument("--seed", type=int, default=0, help="which tools are removed (the figures: 0)")
    parser.add_argument("--fit", action="store_true", help="fit FailedFit on the calibration splits (prints it)")
    parser.add_argument(
        "--loco", action="store_true", help="and each catalogue judged by FailedFit fitted on the others"
    )
    args = parser.parse_args()
    if (args.fit or args.loco) and not set(args.fit_agents.split(",")) <= set(args.agents.split(",")):
        parser.error(f"--fit-agents {args.fit_agents} must be among --agents {args.agents}")
    embedder = WordLlamaEmbedder()
    names = args.sets.split(",")
    every: dict[str, dict[str, tuple[list[MissingRow], list[MissingRow]]]] = {}
    for agent in args.agents.split(","):
        every[agent] = {name: rows_of(name, embedder, agent, FitConfig(), args.seed) for name in names}
    fitted, fitting = None, args.fit_agents.split(",")
    if args.fit:  # a catalogue's calibration rows of the fitting agents, one list
        fitted = fit_failed([[r for a in fitting for r in every[a][name][0]] for name in names])
        print(f"FailedFit fitted on the calibration splits of {', '.join(names)}, agents {args.fit_agents}: {fitted}")
    for agent, rows in every.items():
        show(agent, names, rows, fitted)
    if args.loco:
        leave_one_out(every, names, fitting)


def leave_one_out(
    every: dict[str, dict[str, tuple[list[MissingRow], list[MissingRow]]]], names: list[str], fitting: list[str]
) -> None:
    """Each catalogue's test split judged by FailedFit fitted on the other catalogues' calibration rows (of the
    `fitting` agents)."""
    print("\n\nLEAVE ONE CATALOGUE OUT (FailedFit fitted on the others): unanswerable caught / hit@1 drop")
    for name in names:
        fitted = fit_failed([[r for a in fitting for r in every[a][n][0]] for n in names if n != name])
        cells = []
        for agent, rows in every.items():
            test = rows[name][1]
            caught = np.mean([failed_unfit_row(r, fitted) for r in test if r.kind == UNANSWERABLE])
            answerable = [r for r in test if r.kind == "answerable"]
            lost = np.mean([r.hit and failed_unfit_row(r, fitted) for r in answerable])
            cells.append(f"{agent} {100 * caught:.1f}% / {100 * lost:.1f}")
        print(f"  {name} (threshold {fitted.threshold}): " + " · ".join(cells))


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
