"""The off-policy estimators (rl/evaluation.py): IPS, SNIPS and doubly robust estimates of a candidate's
mean reward per logged decision, with normal-approximation intervals (SNIPS: the delta method), from
running sums (O(1) memory however long the log)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from toolwise.errors import UserError


class ThinSupportError(UserError):
    """The log cannot say how the candidate would do: too few matching decisions, or weights too uneven."""


@dataclass(frozen=True, slots=True)
class Interval:
    estimate: float
    low: float
    high: float
    stderr: float


@dataclass(frozen=True, slots=True)
class Estimates:
    """The candidate's estimated mean reward per decision, three ways, next to the logged policy's own."""

    logged: Interval
    ips: Interval
    snips: Interval
    dr: Interval
    n: int  # decisions evaluated
    matches: int
    ess: float
    confidence: float


@dataclass(slots=True)
class Sums:
    """Running sums the estimators need (O(1) memory however long the log). Per decision: reward r,
    weight w = (candidate's probability of the logged tool, or 1[its pick was it]) / logging propensity,
    and d = q̂(x, candidate's pick) + w·(r − q̂(x, logged tool)), the DR term."""

    n: int = 0
    matches: int = 0
    r: float = 0.0
    r2: float = 0.0
    w: float = 0.0
    w2: float = 0.0
    wr: float = 0.0
    w2r: float = 0.0
    w2r2: float = 0.0
    d: float = 0.0
    d2: float = 0.0

    def add(
        self, reward: float, propensity: float, matched: float, model_logged: float, model_candidate: float
    ) -> None:
        if not 0 < propensity <= 1:
            raise ValueError(f"a propensity must be in (0, 1], got {propensity}")
        w = matched / propensity
        d = model_candidate + w * (reward - model_logged)
        self.n += 1
        self.matches += matched > 0
        self.r += reward
        self.r2 += reward * reward
        self.w += w
        self.w2 += w * w
        self.wr += w * reward
        self.w2r += w * w * reward
        self.w2r2 += (w * reward) ** 2
        self.d += d
        self.d2 += d * d


def _interval(total: float, squares: float, n: int, z: float) -> Interval:
    """Mean and normal interval of n values from their sum and sum of squares."""
    mean = total / n
    stderr = math.sqrt(max(squares - n * mean * mean, 0.0) / (n - 1) / n) if n > 1 else math.inf
    return Interval(mean, mean - z * stderr, mean + z * stderr, stderr)


def estimate_sums(sums: Sums, confidence: float = 0.95) -> Estimates:
    """IPS, SNIPS and DR estimates with normal-approximation intervals, from running sums."""
    n = sums.n
    if n == 0:
        raise ThinSupportError("no logged decision with a propensity and a reward to evaluate on")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    z = NormalDist().inv_cdf((1 + confidence) / 2)
    if sums.w > 0:
        value = sums.wr / sums.w
        # delta method: Σ w²(r − V)² / (Σw)²
        spread = sums.w2r2 - 2 * value * sums.w2r + value * value * sums.w2
        stderr = math.sqrt(max(spread, 0.0)) / sums.w
        snips = Interval(value, value - z * stderr, value + z * stderr, stderr)
    else:
        snips = Interval(math.nan, math.nan, math.nan, math.inf)
    ess = sums.w * sums.w / sums.w2 if sums.w2 > 0 else 0.0
    return Estimates(
        _interval(sums.r, sums.r2, n, z),
        _interval(sums.wr, sums.w2r2, n, z),
        snips,
        _interval(sums.d, sums.d2, n, z),
        n,
        sums.matches,
        ess,
        confidence,
    )


def estimate(
    rewards: NDArray[np.float64],
    propensities: NDArray[np.float64],
    matched: NDArray[np.float64],
    model_logged: NDArray[np.float64],
    model_candidate: NDArray[np.float64],
    confidence: float = 0.95,
) -> Estimates:
    """`estimate_sums` of decisions given as arrays. Row i is a logged decision: its reward, the logging
    propensity of its tool, the candidate's probability of that tool (or the indicator that its one
    draw picked it), and the reward model's q̂ for the logged tool and for the candidate's pick (or its
    expectation under the candidate)."""
    sums = Sums()
    columns = (rewards, propensities, matched, model_logged, model_candidate)
    for row in zip(*(c.tolist() for c in columns), strict=True):
        sums.add(*row)
    return estimate_sums(sums, confidence)
