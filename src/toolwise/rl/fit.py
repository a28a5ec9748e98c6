"""Saying "nothing fits": whether any listed tool serves a request at all, read from the prior's relevance.

A ranking always has a first tool; a request no tool serves ("what is the capital of Peru?" to a
file system) still gets one. Two numbers the prior already computed for the decision say how well the
best candidate matches: the best cosine of the query with a tool document (the semantic prior) and
how much of the query the best BM25 match covers (`LexicalIndex.coverage`). A fixed logistic model
over them (fitted offline on public data by `python bench/unanswerable.py --fit`; its coefficients are
`FitConfig`'s defaults) gives the probability that nothing fits; above `threshold`, nothing does.

Text alone separates requests from another domain well and requests of the catalogue's own domain
whose tool is missing poorly (bench/unanswerable.py prints both), so the default threshold is set
for a small loss of right answers, not for catching every unanswerable request. Without an embedder
the detector says nothing: BM25 alone did not carry a threshold from one data set to another.

Once toolwise has seen traffic, outcomes say more: the outcome memory keeps the requests each tool
worked for (rl/outcomes.py). When the first candidate has worked for enough kinds of request, alike
enough to say what it serves, a
second logistic model (`LearnedFit`) adds how near the request comes to the nearest of them: a
request far from everything a well-known tool served is seldom its kind. With less evidence the
zero-shot model decides.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.outcomes import Served
from toolwise.rl.toolindex import ToolIndex


def _check_finite(config: LearnedFit | FitConfig, name: str) -> None:
    for f in fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name}.{f.name} must be finite, got {value}")


@dataclass(frozen=True, slots=True)
class LearnedFit:
    """The "nothing fits" model once the first candidate is known by its outcomes (it worked for at least
    `min_kinds` kinds of request, prototypes in rl/outcomes.py, alike to `min_coherence`):
    logit = intercept + cosine·(best cosine) + coverage·(BM25 coverage) + near·(the best cosine of the
    request's x(q) to a request the first candidate worked for). Fitted by bench/unanswerable.py --fit on
    the calibration splits of BFCL live, NESTFUL and BFCL multi-turn after a stream of their answerable
    requests was learned, the threshold losing at most 1.5 points of hit@1 on each (counting what the
    zero-shot model loses where too little is known). WordLlama's request vectors are much about the
    names in a request ("the time in Lima" and "in Tokyo": cosine 0.3): a tool whose requests differ
    that way (its kinds unlike one another) can seem far from the next one it serves, so then the
    zero-shot model decides."""

    min_kinds: int = 3  # fewer, the zero-shot model decides
    min_coherence: float = 0.4  # the kinds less alike than this (median nearest-other cosine): likewise
    intercept: float = 5.496
    cosine: float = -1.652
    coverage: float = -1.146
    near: float = -7.385
    threshold: float = 0.9151  # probability that nothing fits, above which the decision says so

    def __post_init__(self) -> None:
        _check_finite(self, "LearnedFit")
        if not 0 < self.threshold < 1:
            raise ValueError(f"LearnedFit.threshold must be a probability in (0, 1), got {self.threshold}")
        if self.near > 0 or self.min_kinds < 1:
            raise ValueError(
                f"LearnedFit.near must be ≤ 0 (nearer a served request, less 'nothing fits') and min_kinds ≥ 1, "
                f"got {self.near}, {self.min_kinds}"
            )


@dataclass(frozen=True, slots=True)
class FitConfig:
    """The "nothing fits" model: logit = intercept + cosine·(best cosine) + coverage·(BM25 coverage),
    both in [0, 1]; nothing fits when the probability exceeds `threshold`. Fitted on the calibration
    splits of BFCL live (528 tools, long descriptions) and the README's example (14 tools, one-line
    descriptions) by bench/unanswerable.py --fit, the threshold losing at most 1.5 points of hit@1 on
    either: the level of relevance a right tool reaches differs between such catalogues, and a
    threshold set on one alone says "nothing fits" to right answers on the other."""

    enabled: bool = True
    intercept: float = 3.982
    cosine: float = -6.024
    coverage: float = -0.522
    threshold: float = 0.9477  # probability that nothing fits, above which the decision says so
    learned: LearnedFit = field(default_factory=LearnedFit)  # once the first candidate is known by its outcomes

    def __post_init__(self) -> None:
        _check_finite(self, "FitConfig")
        if not 0 < self.threshold < 1:
            raise ValueError(f"FitConfig.threshold must be a probability in (0, 1), got {self.threshold}")
        if self.cosine > 0 or self.coverage > 0:
            raise ValueError(
                f"FitConfig.cosine and coverage must be ≤ 0 (more relevance, less 'nothing fits'), "
                f"got {self.cosine}, {self.coverage}"
            )


@dataclass(frozen=True, slots=True)
class Relevance:
    """How well the best of a decision's candidates matches its query (each in [0, 1])."""

    cosine: float  # the best cosine of the query with a candidate's document
    coverage: float  # the share of the query's BM25 the best candidate reaches (`LexicalIndex.coverage`)


def relevance_of(index: ToolIndex, query: str | None, arms: NDArray[np.int64]) -> Relevance | None:
    """The relevance of the best of `arms` to `query`, from the scores the index memoised for the decision
    (None without a query or an embedder: then nothing is judged)."""
    semantic = index.semantic
    if not query or semantic is None or not len(arms):
        return None
    lexical = index.lexical
    every = index.knows(arms)  # the usual case: no mask to apply
    known = arms if every else arms[arms < len(semantic)]
    if not len(known):
        return Relevance(0.0, 0.0)
    cosine = float(semantic.scores(query).take(known).max())
    # scores are BM25 over the best of all tools: the best of `arms` times that best's coverage
    documented = known if every else known[known < len(lexical)]
    coverage = float(lexical.scores(query).take(documented).max(initial=0.0)) * lexical.coverage(query)
    return Relevance(cosine, coverage)


def unfit_probability(relevance: Relevance, config: FitConfig) -> float:
    """The model's probability that no candidate serves the request."""
    logit = config.intercept + config.cosine * relevance.cosine + config.coverage * relevance.coverage
    return 1.0 / (1.0 + math.exp(-logit))


def learned_unfit_probability(relevance: Relevance, near: float, learned: LearnedFit) -> float:
    """The learned model's probability that no candidate serves the request, `near` the best cosine of the
    request to one the first candidate worked for."""
    logit = learned.intercept + learned.cosine * relevance.cosine + learned.coverage * relevance.coverage
    return 1.0 / (1.0 + math.exp(-(logit + learned.near * near)))


def nothing_fits(
    index: ToolIndex,
    query: str | None,
    arms: NDArray[np.int64],
    config: FitConfig,
    served: Served | None = None,
    coherence: Callable[[], float] | None = None,
) -> bool:
    """Whether no tool of `arms` seems to serve `query` (False when switched off or without an embedder).
    `served`: what the first candidate worked for (`Policy.served`); with enough kinds of request, alike
    enough (`coherence`, asked only when the two models disagree: it costs the most; else `served`'s),
    the learned model decides, else the zero-shot one."""
    if not config.enabled:
        return False
    relevance = relevance_of(index, query, arms)
    if relevance is None:
        return False
    zero_shot = unfit_probability(relevance, config) > config.threshold
    learned = config.learned
    if served is None or not len(served.kinds) or served.kinds[0] < learned.min_kinds:
        return zero_shot
    verdict = learned_unfit_probability(relevance, float(served.near[0]), learned) > learned.threshold
    if verdict == zero_shot:  # whether the first candidate's requests are alike cannot change it
        return verdict
    alike = coherence() if coherence is not None else float(served.coherence[0])
    return verdict if alike >= learned.min_coherence else zero_shot
