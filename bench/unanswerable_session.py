"""bench/unanswerable_missing.py's catalogues and stream, each test request met in a session of its own: the
agent follows toolwise and asks again after each failed try, up to four tries. What the session's own tries
say (rl/fit.py's `tried_unfit`: different tools tried for this very request, each failing) beside what the
models said on each ask.

The calibration split is learned as there (the `fails` agent: an unserved request's first 1–3
recommendations called, each failing). Then each test request on a copy of that learner (no test request
learns from another): toolwise is asked; the agent calls its first recommendation not yet tried; an
answerable request's right tool works and ends the session, any other call fails (FIT: a pessimistic
agent, a wrong tool never "succeeds" nor refuses its arguments); after a failure it asks again (the failure
waits for the next call before it is learned, as live). Per catalogue, the share of unanswerable requests
said to fit nothing by the first ask, after one, two and three failed tries, and the answerable ones solved
within the tries, less those told "nothing fits" on an ask up to the one that solved them (an agent told so
stops): the cost, in points of the answerable requests. Only requests that reach a second ask are copied
(a copy costs about 0.15 s of CPU).

    python bench/unanswerable_session.py                 # three catalogues (~5 minutes)
    python bench/unanswerable_session.py --sets nestful  # iterating
"""

from __future__ import annotations

import argparse
import copy
import logging
import pickle
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from unanswerable import SETS
from unanswerable_learned import normal
from unanswerable_stream import UNANSWERABLE, Stream, splits

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.fit import FitConfig, tried_unfit
from toolwise.rl.learner import Learner
from toolwise.rl.steps import FIT, Step

TRIES = 4
LISTED = 100  # the candidates: more than the tries, as in every catalogue here


@dataclass(frozen=True, slots=True)
class Session:
    kind: str  # answerable or UNANSWERABLE
    said: list[bool]  # the models said nothing fits, on each ask (the session's tries not read)
    tried: list[int]  # the different tools tried for it, each failing, before each ask
    works: list[float]  # P(works) of the tool the agent calls next, on each ask
    solved_at: int | None  # the ask whose recommendation worked (answerable)


def meet(learner: Learner, kind: str, request: dict[str, Any], fit: FitConfig, n: int) -> Session:
    """One test request's session (see the module's docstring); `learner` is changed: pass a copy."""
    query, right = request["query"], set(request["tools"])
    rng = np.random.default_rng(zlib.crc32(query.encode()))
    tried: list[str] = []
    said: list[bool] = []
    works: list[float] = []
    step, reward = None, 0.0
    for k in range(TRIES):
        previous = tried[-1] if tried else None
        decision = learner.recommend(query, rng, top_k=5, previous_tool=previous, position=k, history=tuple(tried))
        said.append(decision.nothing_fits)
        following = next((r for r in decision.ranked if r.tool not in tried), None)
        if following is None:
            break
        pick = following.tool
        works.append(following.expected)
        ok = kind == "answerable" and pick in right
        step = Step(
            pick,
            ok,
            100.0,
            query=query,
            previous_tool=previous,
            position=k,
            history=tuple(tried),
            session=f"test-{n}",
            fault=None if ok else FIT,
            after_failure=k > 0,
            followed=True,
        )
        reward = learner.learn(step, rng).reward
        tried.append(pick)
        if ok:
            learner.end_episode(step, reward, rng)
            return Session(kind, said, list(range(k + 1)), works, k)
    return Session(kind, said, list(range(len(said))), works, None)


def sessions(stream: Stream, judged: Sequence[tuple[str, dict[str, Any]]], fit: FitConfig) -> list[Session]:
    learner, embedder = stream.learner, stream.embedder
    out = []
    for n, (kind, request) in enumerate(judged):
        first = learner.recommend(request["query"], np.random.default_rng(zlib.crc32(request["query"].encode())))
        if kind == "answerable" and first.ranked[0].tool in request["tools"]:  # solved on the first ask: no copy
            out.append(Session(kind, [first.nothing_fits], [0], [first.ranked[0].expected], 0))
            continue
        out.append(meet(copy.deepcopy(learner, {id(embedder): embedder}), kind, request, fit, n))
    return out


Rule = Callable[[int, float], bool]  # (different tools tried and failing, P(works) of the next) → nothing fits


def row(label: str, found: Sequence[Session], rule: Rule) -> str:
    """The shares said to fit nothing by each ask, by the models or `rule`, and what it costs."""

    def says(s: Session, k: int) -> bool:
        return any(s.said[: k + 1]) or any(rule(n, p) for n, p in zip(s.tried[: k + 1], s.works[: k + 1], strict=False))

    unanswerable = [s for s in found if s.kind == UNANSWERABLE]
    answerable = [s for s in found if s.kind == "answerable"]
    caught = [100 * np.mean([says(s, k) for s in unanswerable]) for k in range(TRIES)]
    solved = [s for s in answerable if s.solved_at is not None]
    kept = [s for s in solved if s.solved_at is not None and not says(s, s.solved_at)]  # asked, told, stopped
    lost = 100 * (len(solved) - len(kept)) / len(answerable)
    cells = " | ".join(f"{c:.1f}%" for c in caught)
    return f"| {label} | {cells} | {100 * len(solved) / len(answerable):.1f}% | {lost:.1f} |"


def rules(fit: FitConfig) -> dict[str, Rule]:
    return {
        "before (the models alone)": lambda n, p: False,
        f"now: {fit.tried} different tools tried, each failing": lambda n, p: tried_unfit(
            [f"{i}" for i in range(n)], fit, LISTED
        ),
        "2 tools tried": lambda n, p: n >= 2,
        "2 tools tried, the next P(works) < 0.5": lambda n, p: n >= 2 and p < 0.5,
        "2 tools tried, the next P(works) < 0.3": lambda n, p: n >= 2 and p < 0.3,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--seed", type=int, default=0, help="which tools are removed (the figures: 0)")
    parser.add_argument("--save", help="pickle each catalogue's sessions to <SAVE>-<catalogue>.pkl")
    args = parser.parse_args()
    embedder, fit = WordLlamaEmbedder(), FitConfig()
    print(
        "| toolwise | nothing fits, first ask | after one failed try | after two | after three | answerable solved "
        f"in {TRIES} tries | turned away (points) |\n|---|---:|---:|---:|---:|---:|---:|"
    )
    for name in args.sets.split(","):
        s = splits(name, args.seed)
        learned, judged = s.rounds[1]
        stream = Stream(s.tools, embedder, "fails", fit)
        texts = {normal(r["query"]) for _, r in judged}
        stream.learn([(k, r) for k, r in learned if normal(r["query"]) not in texts])
        found = sessions(stream, judged, fit)
        if args.save:
            with open(f"{args.save}-{name}.pkl", "wb") as f:
                pickle.dump(found, f)
        print(f"| **{name}** |")
        for label, rule in rules(fit).items():
            print(row(label, found, rule), flush=True)


if __name__ == "__main__":
    logging.getLogger("client").setLevel(logging.ERROR)
    main()
