"""Fitting the zero-shot "nothing fits" models of rl/fit.py (`FitConfig`, `DomainFit`) for bench/unanswerable.py.

Each is a logistic regression on the calibration splits' rows, unanswerable requests against answerable
hits (an answerable miss said to fit nothing costs nothing), its threshold the lowest probability losing
at most TARGET_DROP points of answerable hit@1 on each calibration set. `FitConfig`'s own model learns
every unanswerable kind (requests from another domain weigh most); `DomainFit` learns held-out requests
alone (the catalogue's own domain, the tool missing), both classes weighted alike, its threshold set for
what both models lose together.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import numpy as np
from unanswerable_servers import KIND

from toolwise.rl.fit import DomainFit, FitConfig, Relevance, unfit_probability

KINDS = ("held-out", "irrelevance", "live_irrelevance", KIND)  # the unanswerable kinds (KIND: server missing)
TARGET_DROP = 1.5  # points of answerable hit@1 a threshold may cost on the calibration split


class Judged(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def hit(self) -> bool: ...


class Scored(Judged, Protocol):
    """A judged request as the fitting reads it (bench/unanswerable.py's Row)."""

    @property
    def cosine(self) -> float: ...
    @property
    def coverage(self) -> float: ...
    @property
    def disagreement(self) -> float: ...


R = TypeVar("R", bound=Judged)


def threshold(
    calibration: Sequence[Sequence[R]], value: Callable[[R], float], lost: Callable[[R], bool] = lambda r: False
) -> float:
    """The largest threshold (nothing fits below it) that loses at most TARGET_DROP points of answerable
    hit@1 on each calibration set, counting the hits `lost` says are lost already (another model's): the
    best single one, since a higher one catches more."""
    found = math.inf
    for rows in calibration:
        answerable = [r for r in rows if r.kind == "answerable"]
        gone = sum(r.hit and lost(r) for r in answerable)
        hits = sorted(value(r) for r in answerable if r.hit and not lost(r))
        allowed = max(int(TARGET_DROP / 100 * len(answerable)) - gone, 0)
        found = min(found, hits[allowed] if allowed < len(hits) else math.inf)
    return found


def logistic(x: np.ndarray, y: np.ndarray, l2: float = 1e-2, weights: np.ndarray | None = None) -> np.ndarray:
    """Weights (intercept first) of an L2-regularised logistic regression, by Newton's method."""
    x = np.c_[np.ones(len(x)), x]
    w = np.zeros(x.shape[1])
    s = np.ones(len(y)) if weights is None else weights
    ridge = l2 * np.diag([0.0] + [1.0] * (x.shape[1] - 1))
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ w))
        w -= np.linalg.solve((x.T * (s * p * (1 - p))) @ x + ridge, x.T @ (s * (p - y)) + ridge @ w)
    return w


def probability_at(cut: float) -> float:
    """A threshold on the logit as a probability, rounded up: a calibration hit exactly at the cut stays answered."""
    return math.ceil(1e4 / (1 + math.exp(-cut))) / 1e4 if math.isfinite(cut) else 0.9999


def fit(calibration: Sequence[Sequence[Scored]]) -> FitConfig:
    """FitConfig fitted on the calibration sets' rows: its own model on every unanswerable kind (on the
    cosine alone where coverage would weigh for "nothing fits"), then `DomainFit` on held-out requests."""
    pooled = [r for rows in calibration for r in rows]
    positive = [r for r in pooled if r.kind in KINDS]
    negative = [r for r in pooled if r.kind == "answerable" and r.hit]
    x = np.array([[r.cosine, r.coverage] for r in positive + negative])
    y = np.r_[np.ones(len(positive)), np.zeros(len(negative))]
    w = logistic(x, y)
    if w[2] > 0:  # more coverage, more "nothing fits": not a rule to ship (FitConfig refuses it); without it
        w = np.r_[logistic(x[:, :1], y), 0.0]
    cut = -threshold(calibration, lambda r: -(w[0] + w[1] * r.cosine + w[2] * r.coverage))  # on the logit
    config = FitConfig(
        intercept=round(float(w[0]), 3),
        cosine=round(float(w[1]), 3),
        coverage=round(float(w[2]), 3),
        threshold=probability_at(cut),
    )
    return FitConfig(
        intercept=config.intercept,
        cosine=config.cosine,
        coverage=config.coverage,
        threshold=config.threshold,
        domain=fit_domain(calibration, config),
    )


def fit_domain(calibration: Sequence[Sequence[Scored]], config: FitConfig) -> DomainFit:
    """DomainFit on held-out requests against answerable hits (each class weighing half), its threshold the
    lowest losing, with what `config`'s own model loses, at most TARGET_DROP points on each set."""
    pooled = [r for rows in calibration for r in rows]
    positive = [r for r in pooled if r.kind == "held-out"]
    negative = [r for r in pooled if r.kind == "answerable" and r.hit]
    x = np.array([[r.cosine, r.coverage, r.disagreement] for r in positive + negative])
    y = np.r_[np.ones(len(positive)), np.zeros(len(negative))]
    weights = np.where(y == 1, len(y) / (2 * len(positive)), len(y) / (2 * len(negative)))
    w = logistic(x, y, weights=weights)

    def own(r: Scored) -> bool:
        return unfit_probability(Relevance(r.cosine, r.coverage), config) > config.threshold

    def logit(r: Scored) -> float:
        return float(w[0] + w[1] * r.cosine + w[2] * r.coverage + w[3] * r.disagreement)

    cut = -threshold(calibration, lambda r: -logit(r), own)
    return DomainFit(
        intercept=round(float(w[0]), 3),
        cosine=round(float(w[1]), 3),
        coverage=round(float(w[2]), 3),
        disagreement=round(float(w[3]), 3),
        threshold=probability_at(cut),
    )
