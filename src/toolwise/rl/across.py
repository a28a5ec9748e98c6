"""Whether a call of a tool fits a kind of request, learned across requests: the outcome evidence that
carries from one request to others (rl/outcomes.py keeps each request's own).

An agent's recurring confusion is met on a request seen once or twice; its own outcomes there may say
nothing (the wrong call worked, unrated) or too little. What the tool's calls did on other requests says
more: the confused tool works for its own kind of request and fails for this kind, and the right tool was
seen to work for requests like this one. Per tool, a ridge regression (λ = 1, Sherman–Morrison updates)
of "it fit" − ½ on the leading `dim` components of x(q), unit length: a tool never called predicts ½.
The outcome policy reads it only where the request's own outcomes say nothing of the choice model's first
(but may have seen another of its first tools fail), on a session's first call, and once such leads have
proved right (`Trials`; OutcomeModel.lead): a linear model of fit across requests knows nothing of
sequences, and leading with it wherever it knew a tool to fit better cost real traffic.
float64: dim × (dim + 1) × 8 bytes a tool (8 KB at 32).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.ids import grown_rows


@dataclass(frozen=True, slots=True)
class AcrossConfig:
    dim: int = 32  # leading components of x(q) the regression is over

    def __post_init__(self) -> None:
        if self.dim < 2:
            raise ValueError(f"need dim ≥ 2, got {self.dim}")


class FitAcross:
    def __init__(self, width: int, config: AcrossConfig | None = None) -> None:
        """`width`: the length of x(q) (the choice model's `dim`); the regression reads its head."""
        self.config = c = config or AcrossConfig()
        if c.dim > width:
            raise ValueError(f"need dim ≤ the features' {width}, got {c.dim}")
        self.a_inv = np.repeat(np.eye(c.dim)[None], 16, 0)
        self.b = np.zeros((16, c.dim))

    def _ensure(self, arm: int) -> None:
        rows = len(self.b)
        if arm < rows:
            return
        grow = grown_rows(rows, [arm]) - rows
        dim = self.config.dim
        self.a_inv = np.concatenate([self.a_inv, np.repeat(np.eye(dim)[None], grow, 0)])
        self.b = np.concatenate([self.b, np.zeros((grow, dim))])

    def head(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        """The leading `dim` components of x(q), unit length (zero for no request)."""
        v = x[: self.config.dim]
        norm = math.sqrt(float(v @ v))
        return v / norm if norm else v

    def predict(self, arms: NDArray[np.int64], x: NDArray[np.float64]) -> NDArray[np.float64]:
        """Each arm's predicted fit (about 0..1; ½ for a tool never called) for the request x(q)."""
        known = arms < len(self.b)
        safe = np.where(known, arms, 0)
        b = self.b.take(safe, 0)
        if not b.any():  # none of them called (θ = A⁻¹·0): ½ each, without gathering their A⁻¹ (8 KB a tool)
            return np.full(len(arms), 0.5)
        v = self.head(x)
        theta = np.einsum("aij,aj->ai", self.a_inv.take(safe, 0), b)
        out: NDArray[np.float64] = 0.5 + np.where(known, theta @ v, 0.0)
        return out

    def add(self, arm: int, x: NDArray[np.float64], fit: float) -> None:
        """One call of `arm` at x(q) that fit (1) or not (0). No request, nothing learned."""
        v = self.head(x)
        if not v.any():
            return
        self._ensure(arm)
        av = self.a_inv[arm] @ v
        self.a_inv[arm] -= np.outer(av, av) / (1.0 + float(v @ av))
        self.b[arm] += (fit - 0.5) * v

    def add_many(self, arms: list[int], x: NDArray[np.float64], rows: list[int], fits: list[float]) -> None:
        """`add` of each call in order: call i of `arms[i]` at the request `x[rows[i]]` (a run's distinct
        requests) that fit `fits[i]`. A tool's calls are its own sequence of updates and tools do not touch
        one another, so the i-th call of every tool is learned together (`rounds`): the same numbers, since a
        stacked matmul runs one gemv (and one dot) a tool, as `add`'s products do."""
        v = x[:, : self.config.dim]
        norms = np.sqrt(np.matmul(v[:, None, :], v[:, :, None])[:, 0, 0])  # each row's `v @ v`, as `head`'s
        said = norms > 0
        heads = np.divide(v, norms[:, None], out=v.copy(), where=said[:, None])
        at = np.array(rows, dtype=np.int64)
        calls = np.flatnonzero(said.take(at)) if len(at) else at
        tools, at = np.array(arms, dtype=np.int64).take(calls), at.take(calls)
        self._ensure(grown_rows(len(self.b), tools.tolist()) - 1)  # grown as call by call: the same shape
        change = np.array(fits, dtype=np.float64).take(calls) - 0.5
        order, bounds = rounds(tools)
        by_round, heads_by_round = tools.take(order), heads.take(at.take(order), 0)
        for start, stop in bounds:
            tool, head = by_round[start:stop], heads_by_round[start:stop]
            a_inv = self.a_inv.take(tool, 0)
            av = np.matmul(a_inv, head[:, :, None])  # each tool's `a_inv @ v`
            outer = av * av.transpose(0, 2, 1)
            outer /= 1.0 + np.matmul(head[:, None, :], av)
            a_inv -= outer
            self.a_inv[tool] = a_inv
        np.add.at(self.b, tools, change[:, None] * heads.take(at, 0))  # each tool's calls added in order

    def revise(self, arm: int, x: NDArray[np.float64], change: float) -> None:
        """A call already counted turned out otherwise (a rating): its target moves by `change`."""
        v = self.head(x)
        if v.any() and arm < len(self.b):
            self.b[arm] += change * v

    def forget(self, arm: int) -> None:
        """The tool changed (drift): what it did before says nothing of it now."""
        if arm < len(self.b):
            self.a_inv[arm], self.b[arm] = np.eye(self.config.dim), 0.0

    def state_dict(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "a_inv": self.a_inv.copy(), "b": self.b.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        b = np.asarray(state["b"], dtype=np.float64)
        if b.shape[1:] != (self.config.dim,):
            raise ValueError(f"a fit regression over {b.shape[1:]} components does not fit dim {self.config.dim}")
        self.a_inv = np.asarray(state["a_inv"], dtype=np.float64).copy()
        self.b = b.copy()

    def nbytes(self) -> int:
        return int(self.a_inv.nbytes + self.b.nbytes)


def rounds(keys: NDArray[np.int64]) -> tuple[NDArray[np.int64], list[tuple[int, int]]]:
    """The positions of `keys` ordered by round, and each round's [start, stop) in that order: round r holds
    each key's r-th occurrence, in order (so the keys in a round are distinct, and a key's occurrences come
    round after round)."""
    if not len(keys):
        return np.zeros(0, np.int64), []
    order = np.argsort(keys, kind="stable")
    ordered = keys.take(order)
    first = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    occurrence = np.empty(len(keys), np.int64)
    occurrence[order] = np.arange(len(keys)) - np.repeat(first, np.diff(np.append(first, len(keys))))
    by_round = np.argsort(occurrence, kind="stable")  # within a round, in the keys' order
    stops = np.cumsum(np.bincount(occurrence)).tolist()
    return by_round, list(zip([0, *stops[:-1]], stops, strict=True))


def clearly_better(fit: NDArray[np.float64], than: int, allowed: NDArray[np.bool_], clearly: float) -> int:
    """The position of the best `fit` among the `allowed` ones more than `clearly` above position `than`'s
    (neither it nor position 0), 0 for none."""
    candidates = allowed & (fit > fit[than] + clearly)
    candidates[than] = candidates[0] = False
    return int(np.argmax(np.where(candidates, fit, -np.inf))) if candidates.any() else 0


class Trials:
    """Whether the fit across requests has earned the lead over the choice model's first. At each decision
    where it would put another tool first (nothing of the request's own outcomes saying either way), the two
    are noted; the next call learned for that request counts for whichever of them it called. It leads once
    the tools it would put first are seen to work clearly more often than those they would replace: their
    mean (Beta(1, 1) prior) less one standard deviation at or above the others' mean. An agent that always
    calls toolwise's first (as bench/real_queries.py's does) never calls the other there: with no evidence
    for it, the fit across requests leads only while the first works there less than a fifth of the time,
    and stops once the other does no better. An agent that calls its own choice shows which of the two works."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self.pending: OrderedDict[str, tuple[int, int]] = OrderedDict()  # request (context hash) → (first, other)
        self.record = np.zeros((2, 2))  # rows: the first, the other; columns: worked, failed (call weights)

    def note(self, key: str, first: int, other: int) -> None:
        self.pending[key] = (first, other)
        self.pending.move_to_end(key)
        if len(self.pending) > self.capacity:
            self.pending.popitem(last=False)

    def drop(self, key: str) -> None:
        """The latest decision for the request was no trial: a call that follows says nothing of one."""
        if self.pending:
            self.pending.pop(key, None)

    def count(self, key: str, arm: int, worked: float, failed: float) -> None:
        """A call of `arm` for the request `key` (or a rating's revision of one: negative weights)."""
        trial = self.pending.get(key)
        if trial is None or arm not in trial:
            return
        row = self.record[0 if arm == trial[0] else 1]
        row[0], row[1] = max(0.0, row[0] + worked), max(0.0, row[1] + failed)

    def earned(self) -> bool:
        n = self.record.sum(axis=1)
        mean = (self.record[:, 0] + 1.0) / (n + 2.0)
        sd = np.sqrt(mean * (1.0 - mean) / (n + 3.0))
        return bool(mean[1] - sd[1] >= mean[0])

    def state_dict(self) -> dict[str, Any]:
        return {"record": self.record.copy()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.record = np.asarray(state["record"], dtype=np.float64).copy()
