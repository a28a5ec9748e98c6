"""How much a prototype of requests says of one request: right and wrong tools, told apart from calls.

A tool is right or wrong for a request; a right call works with probability q_r, a wrong one with q_w
(both learned from the outcome memory's own counts, `Mixture.of`). A prototype of the outcome memory
(rl/outcomes.py) pools the calls of one tool at requests alike enough to merge, and where the tool is right
for some of them and wrong for others its success rate μ is a blend: a share θ = (μ − q_w)/(q_r − q_w) of
its requests are right ones, and a request's own rate spreads around μ with variance
(μ − q_w)(q_r − μ). As a Beta around μ that spread is a concentration κ = μ(1 − μ)/((μ − q_w)(q_r − μ)) − 1:
however many calls the prototype pooled, it tells one request no more than κ calls would. Its n calls are
read as n·κ/(n + κ) (n where μ lies outside (q_w, q_r): a prototype all of whose requests agree). A
prototype the request would itself add to (cosine ≥ the memory's `merge`) holds its own calls and is read in
full (rl/outcomes.py). Only the verdicts read it so; the P(works) reported is the kernel's posterior as it was.

Why: in a world where a right tool fails now and then (bench/evaluation.py: q_r = 0.85), a tool's slots fill
and merge into prototypes of ~140 calls at ~0.43 that mix requests it is right for with requests it is not;
a request it is right for, near one of them at cosine 0.66 (kernel 0.1), read 14 calls at 0.43 and was
"predicted to fail" without a call of its own. Where prototypes are pure (a right call always works, a wrong
one mostly fails: bench/outcomes.py) nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True)
class Mixture:
    """q_r and q_w: the probabilities that a call works where its tool is right and where it is wrong."""

    right: float
    wrong: float

    @classmethod
    def of(cls, worked: NDArray[np.float64], failed: NDArray[np.float64]) -> Mixture:
        """From prototypes' counts (any shape): q_r, the pooled success rate of the prototypes that mostly
        worked, q_w of those that mostly failed, each with one success and one failure added (no counts:
        0.5 and 0.5, where no prototype is a blend and every count is read in full)."""
        n = worked + failed
        works = worked > failed  # a prototype at one half is neither (one call each way says nothing)
        fails = worked < failed
        right = (float(worked[works].sum()) + 1.0) / (float(n[works].sum()) + 2.0)
        wrong = (float(worked[fails].sum()) + 1.0) / (float(n[fails].sum()) + 2.0)
        return cls(right, wrong)

    def weight(self, worked: NDArray[np.float64], failed: NDArray[np.float64]) -> NDArray[np.float64]:
        """What each prototype's counts are worth as evidence of one request near it, a factor: κ/(n + κ)
        where its success rate is a blend of right and wrong requests, 1 elsewhere."""
        n = worked + failed
        kappa = self.concentration(worked, failed)
        blend = np.isfinite(kappa)
        weight: NDArray[np.float64] = np.divide(kappa, n + kappa, out=np.ones_like(n), where=blend)
        return weight

    def concentration(self, worked: NDArray[np.float64], failed: NDArray[np.float64]) -> NDArray[np.float64]:
        """κ of each count pair (any shape): as many calls as its pooled requests tell one request where its
        success rate is a blend of right and wrong ones; inf where it is not (no calls, or all agree)."""
        n = worked + failed
        said = n > 0
        mu = np.divide(worked, n, out=np.zeros_like(n), where=said)
        spread = (mu - self.wrong) * (self.right - mu)  # > 0 only strictly between q_w and q_r
        blend = said & (spread > 0)
        kappa = np.maximum(np.divide(mu * (1.0 - mu), spread, out=np.ones_like(n), where=blend) - 1.0, 0.0)
        out: NDArray[np.float64] = np.where(blend, kappa, np.inf)
        return out
