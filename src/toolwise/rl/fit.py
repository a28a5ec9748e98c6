"""Saying "nothing fits": whether any listed tool serves a request at all, read from the prior's relevance.

A ranking always has a first tool; a request no tool serves ("what is the capital of Peru?" to a
file system) still gets one. Two numbers the prior already computed for the decision say how well the
best candidate matches: the best cosine of the query with a tool document (the semantic prior) and
how much of the query the best BM25 match covers (`LexicalIndex.coverage`). A fixed logistic model
over them (fitted offline on public data by `python bench/unanswerable.py --fit`; its coefficients are
`FitConfig`'s defaults) gives the probability that nothing fits; above `threshold`, nothing does. A
second one (`DomainFit`) is for a request of the catalogue's own domain whose tool is missing: its
words still find tools near it, but the tool the embedding ranks first is not the one BM25 does (the
words that named the missing tool point elsewhere). Either one saying so is enough.

Text alone separates requests from another domain well and requests of the catalogue's own domain
whose tool is missing poorly (bench/unanswerable.py prints both), so the default threshold is set
for a small loss of right answers, not for catching every unanswerable request. Without an embedder
the detector says nothing: BM25 alone did not carry a threshold from one data set to another.

Once toolwise has seen traffic, outcomes say more: the outcome memory keeps the requests each tool
worked for (rl/outcomes.py). When the first candidate has worked for enough kinds of request, alike
enough to say what it serves, a
second logistic model (`LearnedFit`) adds how near the request comes to the nearest of them (a
request far from everything a well-known tool served is seldom its kind) and how sure the learned
choice model is that the agent would call it here (p_agent: a request whose tool is missing leaves it
torn between near tools). With less evidence the zero-shot model decides.

Requests no tool serves are tried too: the agent calls the nearest tools, they fail or are rated 1–2,
and the next user asks something alike. The outcome memory keeps those requests among its prototypes
(worked for nothing, failed). Where a best candidate has such a failed request near this one, `FailedFit`
weighs how near it comes against the nearest request a best candidate worked for, with the first's
P(works) (bench/unanswerable_missing.py: tools removed from the catalogue, their requests tried).

Last, the session's own evidence: once the agent has called `FitConfig.tried` different tools (or every
candidate) in a row for this very request in this session, each failing (a fit failure: not a retry of the
same tool, not the downstream's health, not refused arguments) and none working, nothing fits whatever the
models say (bench/unanswerable_session.py). A failure waits for the session's next call before it is
learned (rl/hindsight.py), so the models see the last try only later.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, fields

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.calibration import logit_of
from toolwise.rl.outcomes import Served
from toolwise.rl.policies.base import Selection
from toolwise.rl.toolindex import ToolIndex

TRIED = 3  # "nothing fits" once this many best candidates (or all) are each seen to fail for the request


def _check_finite(config: LearnedFit | DomainFit | FailedFit | FitConfig, name: str) -> None:
    for f in fields(config):
        value = getattr(config, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name}.{f.name} must be finite, got {value}")


@dataclass(frozen=True, slots=True)
class LearnedFit:
    """The "nothing fits" model once the first candidate is known by its outcomes (it worked for at least
    `min_kinds` kinds of request, prototypes in rl/outcomes.py, alike to `min_coherence`):
    logit = intercept + cosine·(best cosine) + coverage·(BM25 coverage) + near·(the best cosine of the
    request's x(q) to a request the first candidate worked for) + agent·logit(p_agent of the first
    candidate: the choice model's probability that the agent calls it). Fitted by bench/unanswerable.py --fit on
    the calibration splits of BFCL live, NESTFUL and BFCL multi-turn after a stream of their answerable
    requests was learned (unanswerable: held-out, irrelevance, and requests whose whole server is missing,
    against answerable hits), the threshold losing at most 1.5 points of hit@1 on each (counting what the
    zero-shot model loses where too little is known). WordLlama's request vectors are much about the
    names in a request ("the time in Lima" and "in Tokyo": cosine 0.3): a tool whose requests differ
    that way (its kinds unlike one another) can seem far from the next one it serves, so then the
    zero-shot model decides."""

    min_kinds: int = 3  # fewer, the zero-shot model decides
    min_coherence: float = 0.4  # the kinds less alike than this (median nearest-other cosine): likewise
    intercept: float = 5.237
    cosine: float = -1.5
    coverage: float = -0.064
    near: float = -5.905
    agent: float = -0.463
    threshold: float = 0.9324  # probability that nothing fits, above which the decision says so

    def __post_init__(self) -> None:
        _check_finite(self, "LearnedFit")
        if not 0 < self.threshold < 1:
            raise ValueError(f"LearnedFit.threshold must be a probability in (0, 1), got {self.threshold}")
        if self.near > 0 or self.agent > 0 or self.min_kinds < 1:
            raise ValueError(
                "LearnedFit.near and agent must be ≤ 0 (nearer a served request, or an agent surer of the tool, "
                f"less 'nothing fits') and min_kinds ≥ 1, got {self.near}, {self.agent}, {self.min_kinds}"
            )


@dataclass(frozen=True, slots=True)
class FailedFit:
    """ "Nothing fits" from requests seen failing: among the best `TRIED` candidates, `unserved` is the best
    cosine of x(q) to a request their calls only failed for and `near` the best to one they worked for;
    logit = intercept + p_works·logit(P(works) of the first) + near·near + failed·unserved + cosine·(best
    cosine of the query with a candidate's document) + crowd·log(1 + the requests, on any tool, that only
    failed within `crowd_within` of x(q): how many are near, not only the nearest; requests for a missing
    tool keep coming and failing); nothing fits above `threshold`. Judged only where some best candidate
    failed for a request alike (`unserved` ≥ `within`) and some worked for a request (else there is
    nothing to weigh the failure against): without such failures, nothing changes. There, where it finds that
    something fits and fewer than `overrule_below` failed requests are near (within `crowd_within`), it
    overrules the words' and the learned models' "nothing fits": the failures nearby show what goes unserved
    here, and this request is not among them (a request the learned choice model is torn over is often
    served). Fitted by
    bench/unanswerable_missing.py --fit on the calibration splits of BFCL live, NESTFUL and BFCL
    multi-turn (a fifth of each catalogue's tools removed, their requests tried and failing or rated 1–2),
    costing at most 1 point of hit@1 on each beyond what the other models lose."""

    enabled: bool = True
    intercept: float = 4.228
    p_works: float = -0.68
    near: float = -9.346
    failed: float = 4.231
    cosine: float = -2.659
    crowd: float = 0.493
    threshold: float = 0.8179  # probability that nothing fits, above which the decision says so
    within: float = 0.3  # a failed request less alike than this (cosine) says nothing of this one
    crowd_within: float = 0.5  # the failed requests counted in `crowd` are at least this alike (cosine)
    overrule_below: int = 1  # judged to fit with fewer failed requests near: the other models' verdict is overruled

    def __post_init__(self) -> None:
        _check_finite(self, "FailedFit")
        if not 0 < self.threshold < 1:
            raise ValueError(f"FailedFit.threshold must be a probability in (0, 1), got {self.threshold}")
        if self.p_works > 0 or self.near > 0 or self.failed < 0 or self.crowd < 0 or self.overrule_below < 0:
            raise ValueError(
                "FailedFit.p_works and near must be ≤ 0 (likelier to work, nearer a served request: less "
                f"'nothing fits'), failed, crowd and overrule_below ≥ 0, got {self.p_works}, {self.near}, "
                f"{self.failed}, {self.crowd}, {self.overrule_below}"
            )
        if not 0 < self.within <= 1 or not 0 < self.crowd_within <= 1:
            raise ValueError(
                f"FailedFit.within and crowd_within must be in (0, 1], got {self.within}, {self.crowd_within}"
            )


@dataclass(frozen=True, slots=True)
class DomainFit:
    """The zero-shot model for a request of the catalogue's own domain whose tool is missing: logit =
    intercept + cosine·(best cosine) + coverage·(BM25 coverage) + disagreement·log(1 + the candidates
    BM25 ranks above the embedding's best). Fitted by bench/unanswerable.py --fit on the same calibration
    splits as `FitConfig`, held-out requests (the right tools removed) against answerable hits weighted
    alike, the threshold chosen so that both models together lose at most 1.5 points of hit@1 on each.
    It decides only while the first candidate has served no request (`zero_shot_unfit`)."""

    intercept: float = 1.118
    cosine: float = -2.292
    coverage: float = -3.236
    disagreement: float = 0.519
    threshold: float = 0.8565  # probability that nothing fits, above which the decision says so

    def __post_init__(self) -> None:
        _check_finite(self, "DomainFit")
        if not 0 < self.threshold < 1:
            raise ValueError(f"DomainFit.threshold must be a probability in (0, 1), got {self.threshold}")
        if self.disagreement < 0:
            raise ValueError(
                f"DomainFit.disagreement must be ≥ 0 (words pointing elsewhere, more 'nothing fits'), "
                f"got {self.disagreement}"
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
    intercept: float = 3.996
    cosine: float = -6.05
    coverage: float = -0.524
    threshold: float = 0.9482  # probability that nothing fits, above which the decision says so
    domain: DomainFit = field(default_factory=DomainFit)  # a request of the catalogue's domain, its tool missing
    learned: LearnedFit = field(default_factory=LearnedFit)  # once the first candidate is known by its outcomes
    failed: FailedFit = field(default_factory=FailedFit)  # once near requests were seen failing on the best
    tried: int = 3  # different tools this session tried for the request, each failing: nothing fits (0: never)

    def __post_init__(self) -> None:
        _check_finite(self, "FitConfig")
        if self.tried < 0:
            raise ValueError(f"FitConfig.tried must be ≥ 0 (0: the session's tries are not read), got {self.tried}")
        if not 0 < self.threshold < 1:
            raise ValueError(f"FitConfig.threshold must be a probability in (0, 1), got {self.threshold}")
        if self.cosine > 0 or self.coverage > 0:
            raise ValueError(
                f"FitConfig.cosine and coverage must be ≤ 0 (more relevance, less 'nothing fits'), "
                f"got {self.cosine}, {self.coverage}"
            )


@dataclass(frozen=True, slots=True)
class Relevance:
    """How well the best of a decision's candidates matches its query (cosine and coverage in [0, 1])."""

    cosine: float  # the best cosine of the query with a candidate's document
    coverage: float  # the share of the query's BM25 the best candidate reaches (`LexicalIndex.coverage`)
    disagreement: float = 0.0  # log(1 + the candidates whose BM25 beats that of the embedding's best)


def relevance_of(index: ToolIndex, query: str | None, arms: NDArray[np.int64]) -> Relevance | None:
    """The relevance of the best of `arms` to `query`, from the scores the index memoised for the decision
    (None without a query or an embedder: then nothing is judged)."""
    semantic = index.semantic
    if not query or semantic is None or not len(arms):
        return None
    lexical = index.lexical
    every = index.knows(arms)  # the usual case: no mask to apply
    known = arms if every else arms[arms < min(len(semantic), len(lexical))]  # both index the same documents
    if not len(known):
        return Relevance(0.0, 0.0)
    cosines = semantic.scores(query).take(known)
    bm25 = lexical.scores(query).take(known)
    top = int(cosines.argmax())
    # scores are BM25 over the best of all tools: the best of `arms` times that best's coverage
    coverage = float(bm25.max()) * lexical.coverage(query)
    return Relevance(float(cosines[top]), coverage, math.log1p(int(np.count_nonzero(bm25 > bm25[top]))))


def unfit_probability(relevance: Relevance, config: FitConfig) -> float:
    """The model's probability that no candidate serves the request."""
    logit = config.intercept + config.cosine * relevance.cosine + config.coverage * relevance.coverage
    return 1.0 / (1.0 + math.exp(-logit))


def domain_unfit_probability(relevance: Relevance, domain: DomainFit) -> float:
    """`DomainFit`'s probability that no candidate serves the request."""
    logit = domain.intercept + domain.cosine * relevance.cosine + domain.coverage * relevance.coverage
    return 1.0 / (1.0 + math.exp(-(logit + domain.disagreement * relevance.disagreement)))


def zero_shot_unfit(relevance: Relevance, config: FitConfig, served_any: bool = False) -> bool:
    """Whether the zero-shot models say no candidate serves the request (either one is enough; `DomainFit`
    only while the first candidate has served no request: once it has, what it served says more)."""
    if unfit_probability(relevance, config) > config.threshold:
        return True
    return not served_any and domain_unfit_probability(relevance, config.domain) > config.domain.threshold


def agent_logit(p_agent: float | None) -> float:
    """logit(p_agent), clipped to ±9.2 (p in [1e-4, 1 − 1e-4]); 0 (even odds) when the policy models no agent."""
    return 0.0 if p_agent is None else logit_of(p_agent)


def learned_unfit_probability(
    relevance: Relevance, near: float, learned: LearnedFit, p_agent: float | None = None
) -> float:
    """The learned model's probability that no candidate serves the request, `near` the best cosine of the
    request to one the first candidate worked for, `p_agent` the choice model's probability of that candidate."""
    logit = learned.intercept + learned.cosine * relevance.cosine + learned.coverage * relevance.coverage
    logit += learned.near * near + learned.agent * agent_logit(p_agent)
    return 1.0 / (1.0 + math.exp(-logit))


def nothing_fits(
    index: ToolIndex,
    query: str | None,
    arms: NDArray[np.int64],
    config: FitConfig,
    served: Served | None = None,
    coherence: Callable[[], float] | None = None,
    p_agent: float | None = None,
) -> bool:
    """Whether no tool of `arms` seems to serve `query` (False when switched off or without an embedder).
    `served`: what the first candidate worked for (`Policy.served`); with enough kinds of request, alike
    enough (`coherence`, asked only when the two models disagree: it costs the most; else `served`'s),
    the learned model decides (with `p_agent`, the first candidate's `Selection.agent`), else the zero-shot one."""
    if not config.enabled:
        return False
    relevance = relevance_of(index, query, arms)
    if relevance is None:
        return False
    zero_shot = zero_shot_unfit(relevance, config, served is not None and len(served.kinds) > 0 and served.kinds[0] > 0)
    learned = config.learned
    if served is None or not len(served.kinds) or served.kinds[0] < learned.min_kinds:
        return zero_shot
    verdict = learned_unfit_probability(relevance, float(served.near[0]), learned, p_agent) > learned.threshold
    if verdict == zero_shot:  # whether the first candidate's requests are alike cannot change it
        return verdict
    alike = coherence() if coherence is not None else float(served.coherence[0])
    return verdict if alike >= learned.min_coherence else zero_shot


def failed_judges(served: Served | None, failed: FailedFit) -> bool:
    """Whether `FailedFit` judges: a best candidate failed for a request alike and one worked for a request."""
    if served is None or not failed.enabled or served.failed is None or not len(served.failed):
        return False
    # −1: none failed, or none worked (too little known to weigh)
    return float(served.failed.max()) >= failed.within and float(served.near.max()) >= 0


def failed_unfit_probability(
    served: Served, p_works: float, cosine: float, failed: FailedFit, crowd: int = 0
) -> float | None:
    """`FailedFit`'s probability that no candidate serves the request, from what the best candidates (the
    first first) `served` and failed for and how many failed requests are near (`crowd`,
    `Policy.failed_near`); None where it does not judge (`failed_judges`)."""
    if not failed_judges(served, failed):
        return None
    assert served.failed is not None
    logit = failed.intercept + failed.p_works * logit_of(p_works) + failed.near * float(served.near.max())
    logit += failed.failed * float(served.failed.max()) + failed.cosine * cosine + failed.crowd * math.log1p(crowd)
    return 1.0 / (1.0 + math.exp(-logit))


def failed_unfit(
    index: ToolIndex,
    query: str | None,
    arms: NDArray[np.int64],
    served: Served | None,
    p_works: float,
    failed: FailedFit,
    crowd: Callable[[], int | None],
    said: bool,
) -> bool:
    """Whether nothing of `arms` fits this request once requests seen failing on the best candidates are
    weighed (`FailedFit`): `said`, the other models' verdict, where it does not judge; `crowd`: how many
    failed requests are near (`Policy.failed_near`, asked only where it judges: it reads every failed tool)."""
    if not failed_judges(served, failed):
        return said  # the usual case, asked first: no best candidate failed for any request
    assert served is not None
    relevance = relevance_of(index, query, arms)
    if relevance is None:
        return said
    near_failed = crowd() or 0
    probability = failed_unfit_probability(served, p_works, relevance.cosine, failed, near_failed)
    if probability is not None and probability > failed.threshold:
        return True
    return said and near_failed >= failed.overrule_below


def tried_unfit(tried: Collection[str], config: FitConfig, listed: int) -> bool:
    """Whether the session's own tries say nothing fits: `tried` are the different tools it called for this
    very request, each failing, none working (`Session.tried_for`); `config.tried` of them are enough, or
    all `listed` candidates."""
    return config.enabled and config.tried > 0 and len(set(tried)) >= min(config.tried, listed)


def all_fail(selection: Selection) -> bool:
    """Whether the best `TRIED` candidates (all, if fewer) were each seen to fail for such requests: what
    was tried says no tool serves it, whatever the words say (policies that predict outcomes)."""
    failing = selection.failing
    return failing is not None and len(failing) > 0 and bool(failing[:TRIED].all())
