"""An imperfect agent on real requests, for bench/outcomes.py: it calls the right tool a set share of the
time, and part of its mistakes recur (the same confusion on the same requests, as an LLM's do); what its
calls give back (a failure, a success, a rating) is drawn once per position of the stream, so every arm
of a run meets the same world. Also the outcome-ridge reference, learning from the same calls.

The world, per request: its confusion, the wrong tool most similar to its (first) right tool (cosine of
the tools' document embeddings), and the next `SIMILAR` most similar wrong tools. A fixed subset of the
requests is confused: there the agent is right `RIGHT_WHEN_CONFUSED` of the time and calls the confusion
`CONFUSION` of the time (else one of the similar tools); elsewhere it is right just often enough that
its accuracy over the set is `accuracy`, its mistakes random among the similar tools. The subset is
sized so that its mistakes are `recurring` of all the agent's mistakes (30% of the requests at 60% and
`recurring` 0.6; 15% at 80%). A right call works (rated 4–5 `RATED_RIGHT` of the time); a wrong call
fails `FAILS` of the time, else it works and is rated 1–2 `RATED_WRONG` of the time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

SIMILAR = 5  # the wrong tools, after the confusion, that random mistakes fall on
RIGHT_WHEN_CONFUSED = 0.2
CONFUSION = 0.75  # on a confused request; the rest of the time one of the similar tools
FAILS = 0.5  # a wrong call fails this often
RATED_WRONG = 0.5  # a wrong call that worked is rated 1–2 this often
RATED_RIGHT = 0.25  # a right call is rated 4–5 this often


@dataclass(frozen=True)
class Request:
    query: str
    right: tuple[str, ...]  # the right tools, the first one first (the one a confusion is taken from)


def load(path: Path) -> tuple[list[dict[str, Any]], list[Request]]:
    """A data set of bench/data/ (tools.jsonl, queries.jsonl)."""
    tools = [json.loads(line) for line in (path / "tools.jsonl").read_text().splitlines()]
    rows = [json.loads(line) for line in (path / "queries.jsonl").read_text().splitlines()]
    return tools, [Request(r["query"], tuple(r["tools"])) for r in rows]


@dataclass(frozen=True)
class Trouble:
    """The wrong tools a request's mistakes fall on."""

    confusion: str
    similar: tuple[str, ...]


def unit(vectors: NDArray[np.float64]) -> NDArray[np.float64]:
    norms: NDArray[np.float64] = np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return vectors / norms


def troubles(
    requests: list[Request], names: list[str], tools: NDArray[np.float64], queries: NDArray[np.float64] | None = None
) -> list[Trouble]:
    """Per request, the wrong tools most similar (cosine of the tools' embeddings `tools`) to its first
    right tool, or, given `queries` (the requests' embeddings), to the request itself: the mistakes a
    reader of the text would make."""
    tools = unit(tools)
    index = {n: i for i, n in enumerate(names)}
    found = []
    for i, r in enumerate(requests):
        similarity = tools @ (tools[index[r.right[0]]] if queries is None else unit(queries[i : i + 1])[0])
        order = [names[j] for j in np.argsort(-similarity, kind="stable") if names[j] not in r.right]
        found.append(Trouble(order[0], tuple(order[1 : SIMILAR + 1])))
    return found


def difficulty(
    requests: list[Request], names: list[str], tools: NDArray[np.float64], queries: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Per request, how far the text misleads: the cosine of the wrong tool most similar to it minus that of
    its most similar right tool (above 0: a reader of the text alone would pick a wrong tool)."""
    similarity = unit(queries) @ unit(tools).T
    right = np.zeros_like(similarity, dtype=bool)
    index = {n: i for i, n in enumerate(names)}
    for i, r in enumerate(requests):
        right[i, [index[t] for t in r.right]] = True
    best_right = np.where(right, similarity, -np.inf).max(axis=1)
    return np.asarray(np.where(right, -np.inf, similarity).max(axis=1) - best_right, dtype=np.float64)


@dataclass(frozen=True)
class Outcome:
    worked: bool  # the call did not fail
    rating: int | None  # the user's rating, when one was given

    @property
    def good(self) -> bool:
        """What the agent's user saw: a call that worked and was not rated low."""
        return self.worked and (self.rating is None or self.rating >= 3)


@dataclass(frozen=True)
class Stream:
    """The requests in the order they come (each comes back once per pass), the agent's own choice at each
    position, and the draws that decide what a call gives back there, whichever tool is called."""

    requests: list[Request]
    order: NDArray[np.int64]  # request index at each position
    confused: NDArray[np.bool_]  # per request: one of the agent's recurring confusions
    choice: list[str]  # the agent's own choice at each position
    draws: NDArray[np.float64]  # per position: fail, rate, which rating

    def request(self, position: int) -> Request:
        return self.requests[int(self.order[position])]

    def right(self, position: int, tool: str) -> bool:
        return tool in self.request(position).right

    def outcome(self, position: int, tool: str) -> Outcome:
        fail, rate, which = self.draws[position]
        if self.right(position, tool):
            return Outcome(True, (4 if which < 0.5 else 5) if rate < RATED_RIGHT else None)
        if fail < FAILS:
            return Outcome(False, None)
        return Outcome(True, (1 if which < 0.5 else 2) if rate < RATED_WRONG else None)

    def hits(self, tools: list[str]) -> NDArray[np.float64]:
        """1 where the tool named at a position is one of that request's right tools."""
        return np.array([self.right(i, t) for i, t in enumerate(tools)], dtype=float)

    def works(self, tools: list[str]) -> NDArray[np.float64]:
        """Per position, the probability that a call of the tool named there works (succeeds, not rated
        1–2): 1 for a right tool, (1 − FAILS)(1 − RATED_WRONG) for a wrong one. What `confidence`, P(works),
        claims; the expectation rather than one draw, so the reliability table is not blurred by the coin."""
        hits = self.hits(tools)
        wrong_works: NDArray[np.float64] = hits + (1.0 - hits) * (1.0 - FAILS) * (1.0 - RATED_WRONG)
        return wrong_works

    def on_confused(self) -> NDArray[np.bool_]:
        """Per position: the request is one of the agent's recurring confusions."""
        return self.confused[self.order]


def simulate(
    requests: list[Request],
    trouble: list[Trouble],
    accuracy: float,
    recurring: float,
    length: int,
    seed: int,
    hardness: NDArray[np.float64] | None = None,
) -> Stream:
    """`length` positions: shuffled passes over the requests; the agent right `accuracy` of the time. Its
    confusions are on the requests of highest `hardness` (`difficulty`) if given, else on random ones."""
    mistakes_when_confused = 1 - RIGHT_WHEN_CONFUSED
    share = recurring * (1 - accuracy) / mistakes_when_confused  # of the requests confused
    right_elsewhere = (accuracy - share * RIGHT_WHEN_CONFUSED) / (1 - share)
    if not 0 <= share < 1 or not 0 <= right_elsewhere <= 1:
        raise ValueError(f"no agent is right {accuracy:.0%} with {recurring:.0%} of its mistakes recurring")
    rng = np.random.default_rng(seed)
    confused = np.zeros(len(requests), dtype=bool)
    ranked = rng.permutation(len(requests)) if hardness is None else np.argsort(-hardness, kind="stable")
    confused[ranked[: round(share * len(requests))]] = True
    passes = -(-length // len(requests))
    order = np.concatenate([rng.permutation(len(requests)) for _ in range(passes)])[:length]
    choice = []
    for i in order.tolist():
        r, t, u = requests[i], trouble[i], rng.random()
        if confused[i]:
            wrong_share = (u - RIGHT_WHEN_CONFUSED) / mistakes_when_confused  # in 0..1 when wrong
            if u < RIGHT_WHEN_CONFUSED:
                choice.append(r.right[int(rng.integers(len(r.right)))])
            elif wrong_share < CONFUSION / mistakes_when_confused:
                choice.append(t.confusion)
            else:
                choice.append(t.similar[int(rng.integers(len(t.similar)))])
        elif u < right_elsewhere:
            choice.append(r.right[int(rng.integers(len(r.right)))])
        else:
            wrong = (t.confusion, *t.similar)
            choice.append(wrong[int(rng.integers(len(wrong)))])
    return Stream(requests, order, confused, choice, rng.random((length, 3)))


class OutcomeRidge:
    """The outcome reference: per tool, ridge regression (λ = 1) of "the call was good" (worked, not rated
    low) minus ½ on the query's embedding (its leading `dim` components), so a tool never called predicts
    ½. It recommends the tool predicted best among those with evidence here (x'A⁻¹x ≤ `evidence`: about
    one call on this very request), if that is above ½; else the agent's own choice."""

    def __init__(self, tools: int, dim: int = 64, evidence: float = 0.5) -> None:
        self.dim, self.evidence = dim, evidence
        self.a_inv = np.repeat(np.eye(dim)[None], tools, 0)
        self.b = np.zeros((tools, dim))
        self.theta = np.zeros((tools, dim))
        self.called: list[int] = []  # tools called at least once, in the order first called
        self.seen: set[int] = set()

    def features(self, embedding: NDArray[np.floating]) -> NDArray[np.float64]:
        x = np.asarray(embedding[: self.dim], dtype=np.float64)
        norm = float(np.linalg.norm(x))
        return x / norm if norm else x

    def pick(self, x: NDArray[np.float64], fallback: int) -> tuple[int, float]:
        """The tool recommended for features `x`, and its predicted chance to be good (½ for the fallback
        when nothing has evidence)."""
        if not self.called:
            return fallback, 0.5
        tools = np.array(self.called)
        width = np.einsum("i,tij,j->t", x, self.a_inv[tools], x)
        predicted = 0.5 + self.theta[tools] @ x
        known = width <= self.evidence
        if not known.any():
            return fallback, 0.5
        best = int(np.argmax(np.where(known, predicted, -np.inf)))
        return (int(tools[best]), float(predicted[best])) if predicted[best] > 0.5 else (fallback, 0.5)

    def learn(self, x: NDArray[np.float64], tool: int, good: bool) -> None:
        if tool not in self.seen:
            self.seen.add(tool)
            self.called.append(tool)
        ax = self.a_inv[tool] @ x
        self.a_inv[tool] -= np.outer(ax, ax) / (1.0 + x @ ax)
        self.b[tool] += (float(good) - 0.5) * x
        self.theta[tool] = self.a_inv[tool] @ self.b[tool]
