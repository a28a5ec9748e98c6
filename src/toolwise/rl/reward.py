"""Reward of one execution: success, the user's rating and latency, in one number."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class RewardWeights:
    """Reward figures (the design card's by default). Units: latency in seconds."""

    success: float = 10.0
    failure: float = -5.0
    rating_per_point: float = 2.0  # rating r in 1..5 adds (r - 3) * rating_per_point
    latency_per_second: float = 0.1
    fast_bonus: float = 2.0
    fast_fraction: float = 0.8  # "fast" = latency below this fraction of the tool's running mean
    max_latency_s: float = 30.0  # only to bound the normalised reward; longer calls cost the same

    def __post_init__(self) -> None:
        if self.success <= self.failure:
            raise ValueError(f"success reward must exceed failure reward, got {self.success} ≤ {self.failure}")
        for name in ("rating_per_point", "latency_per_second", "fast_bonus", "max_latency_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be ≥ 0, got {getattr(self, name)}")
        if not 0 < self.fast_fraction <= 1:
            raise ValueError(f"fast_fraction must be in (0, 1], got {self.fast_fraction}")

    @property
    def bounds(self) -> tuple[float, float]:
        """The lowest and highest reward possible (about -9..+16 with the defaults)."""
        low = self.failure - 2 * self.rating_per_point - self.latency_per_second * self.max_latency_s
        high = self.success + 2 * self.rating_per_point + self.fast_bonus
        return low, high


def check_latency(latency_s: float) -> None:
    """A latency a reward can be computed from, or a ValueError naming it."""
    if not math.isfinite(latency_s) or latency_s < 0:
        raise ValueError(f"latency must be a finite number of seconds ≥ 0, got {latency_s!r}")


def check_rating(rating: int | None) -> None:
    """A rating (or none) a reward can be computed from, or a ValueError naming it."""
    if rating is not None and (isinstance(rating, bool) or rating not in (1, 2, 3, 4, 5)):
        raise ValueError(f"rating must be an integer from 1 to 5, got {rating!r}")


def compute_reward(
    weights: RewardWeights,
    *,
    success: bool,
    latency_s: float,
    rating: int | None = None,
    mean_latency_s: float | None = None,
) -> float:
    """Reward of one execution. A missing rating adds nothing; the fast bonus needs a running mean."""
    check_latency(latency_s)
    reward = (weights.success if success else weights.failure) + rating_points(weights, rating)
    reward -= weights.latency_per_second * min(latency_s, weights.max_latency_s)
    if mean_latency_s is not None and latency_s < weights.fast_fraction * mean_latency_s:
        reward += weights.fast_bonus
    return reward


def rating_points(weights: RewardWeights, rating: int | None) -> float:
    """What a rating adds to a reward ((r − 3) × rating_per_point; none: 0), checked."""
    check_rating(rating)
    return 0.0 if rating is None else (rating - 3) * weights.rating_per_point


def normalise(weights: RewardWeights, reward: float) -> float:
    """Reward mapped onto [0, 1] by the weights' bounds: what the policies learn from."""
    low, high = weights.bounds
    return min(1.0, max(0.0, (reward - low) / (high - low)))


class Latencies:
    """The running mean latency per tool id, in seconds: what the reward's speed bonus compares with."""

    def __init__(self, n: int = 16) -> None:
        self.mean = np.zeros(max(n, 16))
        self.count = np.zeros(max(n, 16), dtype=np.int64)

    def grow(self, n: int) -> None:
        """Room for `n` tools (doubling; new tools start with no calls)."""
        if n > len(self.mean):
            extra = max(n, 2 * len(self.mean)) - len(self.mean)
            self.mean = np.concatenate([self.mean, np.zeros(extra)])
            self.count = np.concatenate([self.count, np.zeros(extra, dtype=np.int64)])

    def mean_of(self, arm: int | None) -> float | None:
        """The tool's mean latency so far, None before its first call. Safe to call without the learned
        state's lock while another thread learns (the event loop tracing a call): `grow` and `load` replace
        `mean` and `count` one after the other, so each is read once and the index bounded by both; a
        mean a step stale (or 0.0 between a first call's count and its mean) is all that can be seen."""
        mean, count = self.mean, self.count
        if arm is None or arm >= min(len(mean), len(count)) or count[arm] == 0:
            return None
        return float(mean[arm])

    def add(self, arm: int, seconds: float) -> None:
        self.grow(arm + 1)
        self.count[arm] += 1
        self.mean[arm] += (seconds - self.mean[arm]) / self.count[arm]

    def add_run(self, arms: list[int], seconds: list[float]) -> NDArray[np.float64]:
        """`add` of each (arm, seconds) in order, in one pass: each step's tool's mean before it (NaN
        before its first call), the same recurrence as one at a time."""
        self.grow(max(arms, default=-1) + 1)
        mean: dict[int, float] = {}
        count: dict[int, int] = {}
        before = np.full(len(arms), np.nan)
        for i, (arm, value) in enumerate(zip(arms, seconds, strict=True)):
            n = count.get(arm)
            if n is None:
                n, m = int(self.count[arm]), float(self.mean[arm])
            else:
                m = mean[arm]
            if n:
                before[i] = m
            count[arm] = n + 1
            mean[arm] = m + (value - m) / (n + 1)
        touched = np.fromiter(count, dtype=np.int64, count=len(count))
        self.count[touched] = list(count.values())
        self.mean[touched] = list(mean.values())
        return before

    def state(self, n: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Copies of the means and counts of tool ids 0..n-1 (what `load` takes back)."""
        self.grow(n)
        return self.mean[:n].copy(), self.count[:n].copy()

    def load(self, mean: NDArray[np.float64], count: NDArray[np.int64]) -> None:
        """A saved state's means and counts (one per tool id)."""
        n = max(16, len(mean))
        self.mean, self.count = np.zeros(n), np.zeros(n, dtype=np.int64)
        self.mean[: len(mean)] = mean
        self.count[: len(count)] = count
