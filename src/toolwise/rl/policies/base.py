"""What every policy offers (one protocol, so callers never branch on the policy type)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context
from toolwise.rl.outcomes import Served
from toolwise.rl.replay import Batch, Transition


# Records built on every decision or update (here, in context.py, learner.py, replay.py, ngrams.py)
# are plain slotted dataclasses: a frozen one costs about six times as much to construct.
@dataclass(slots=True)
class Selection:
    """A policy's choice among `arms` (tool ids). `ranked`/`scores` are best first; `propensity` is
    the probability the policy had of choosing `chosen` (for off-line evaluation)."""

    ranked: NDArray[np.int64]
    scores: NDArray[np.float64]
    expected: NDArray[np.float64]  # exploitation estimate of each ranked arm (normalised reward)
    chosen: int
    explored: bool
    propensity: float
    agent: NDArray[np.float64] | None = None  # each ranked arm's probability that the agent calls it (outcome)
    evidence: NDArray[np.float64] | None = None  # the calls (kernel-weighted) `expected` rests on (outcome)
    failing: NDArray[np.bool_] | None = None  # each ranked arm predicted to fail here, with enough evidence
    posterior: NDArray[np.float64] | None = None  # P(works) as the verdicts read it, where `expected` is the
    # confidence reported through another map (outcome); None: `expected` itself


@dataclass(slots=True)
class Update:
    td_error: float
    transition: Transition | None  # what to store for replay; None when the policy does not replay


FEATURES = ("cosine", "bm25", "sequence", "first_call", "repeat")  # the columns of f_t (see choice.py's docstring)


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a policy declares it does, so that callers read declarations instead of its type (as River's
    and MABWiser's estimators do). Every policy offers `select`, `expected` and `learn_one`."""

    candidates: bool = False  # scores feature rows (arms × FEATURES) instead of one prior a tool, and learns
    # each call as a choice among its candidates (`Lesson.candidates`/`rows`)
    next_context: bool = False  # bootstraps from the next context (TD): a step's `Lesson.next_context` is read
    replay: bool = False  # `learn_one` hands back a transition, and `replay` learns again from sampled ones
    learn_many: bool = False  # learns a run at once (`learn_many`); without, a run is learned one step at a time
    health: bool = False  # reads `set_health`: a tool that broke lately is ranked down everywhere
    hindsight: bool = False  # a failure is learned once its session's next call is known (rl/hindsight.py)


@dataclass(slots=True)
class Lesson:
    """One observed call as a policy learns it: `arm` (a tool id) was called in `context` and earned the
    normalised `reward` in [0, 1]; `worked` is success not rated 1–2; `weight` how strongly the call
    counts; `prior` the prior's relevance of the arm. `next_context` is None when the episode ended
    (read with `capabilities.next_context`); `candidates`/`rows` are the tools the call chose among and
    their feature rows, and `passed_over` the recommended arm the agent did not call (read with
    `capabilities.candidates`). `fit` is what the call says of the tool's fit to the request, as the
    learner read it in hindsight (1 worked, 0 did not fit, None: nothing, e.g. a retried bad call, a
    timeout); `fit_before` is set when a rating revises the fit of a call already learned."""

    context: Context
    arm: int
    reward: float
    worked: bool
    weight: float = 1.0
    prior: float = 0.0
    next_context: Context | None = None
    candidates: NDArray[np.int64] | None = None
    rows: NDArray[np.float64] | None = None
    passed_over: int | None = None
    fit: float | None = None
    fit_before: float | None = None
    followed: bool = False  # `arm` is the tool recommended just before the call (else `passed_over` was)


def no_pause() -> None:
    """A run learned without a break (`Lessons.pause`): nobody reads the model between its parts."""


@dataclass(slots=True)
class Lessons:
    """A run of calls in order (row i is call i), as `learn_many` takes it. Call i's query is
    `contexts[context_of[i]]` (each distinct query once, embedded where the prior is semantic; a run is
    long and its queries repeat). With `capabilities.candidates` every call chose among `candidates`,
    and `rows(part)` gives the feature rows of the calls in `part` (calls × candidates × FEATURES):
    computed per minibatch, since a run's rows at once would not fit in memory. `fit` is each call's fit
    as `Lesson.fit` (NaN: none); None: as `worked`. `pause` is called where a long run's state is whole between
    two of its parts (between minibatch steps): a caller may read the model there (rl knows no threads)."""

    contexts: Sequence[Context]
    context_of: NDArray[np.int64]
    arms: NDArray[np.int64]
    rewards: NDArray[np.float64]
    worked: NDArray[np.bool_]
    weights: NDArray[np.float64]
    priors: NDArray[np.float64]
    previous: Sequence[str | None]
    candidates: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    rows: Callable[[range], NDArray[np.floating[Any]]] | None = None
    fit: NDArray[np.float64] | None = None
    minibatch: int | None = None  # calls a minibatch step takes together; None: the policy's own (a log's replay)
    pause: Callable[[], None] = no_pause

    def __len__(self) -> int:
        return len(self.arms)


class Policy(Protocol):
    """Every policy: `select` and `expected` read `inputs`, the prior's relevance of each arm in [0, 1]
    (or, with `capabilities.candidates`, the arms' feature rows); `learn_one` learns one call and
    `learn_many` a run of them (declared by `capabilities.learn_many`; the others learn a run call by
    call). What a capability does not declare is a no-op (see `PolicyBase`)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    health: dict[int, float]  # arm → log of its recent success rate, for the tools that broke lately

    def select(
        self, context: Context, arms: NDArray[np.int64], inputs: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        """Choose among `arms`."""
        ...

    def expected(self, context: Context, arms: NDArray[np.int64], inputs: NDArray[np.float64]) -> NDArray[np.float64]:
        """What `select` reports of each arm (`Selection.expected`) without exploring: normalised reward units,
        or the probability the policy reports."""
        ...

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        """Learn from one call; the TD error (the surprise) and what to keep for replay."""
        ...

    def learn_many(self, lessons: Lessons, rng: np.random.Generator) -> None:
        """Learn a run of calls in order: what it learns equals learning them one by one (a minibatch
        policy, the choice model, up to the order of its steps within a minibatch)."""
        ...

    def replay(self, batch: Batch) -> NDArray[np.float64]:
        """Learn again from replayed transitions weighted by importance; returns their TD errors."""
        ...

    def forget(self, arm: int) -> None:
        """What was learned of one arm no longer holds (its rewards changed): start it afresh."""
        ...

    def set_health(self, arm: int, success_rate: float | None) -> None:
        """A tool that broke lately works this often now (None: it works again)."""
        ...

    def finish_batches(self) -> None:
        """A run of `learn_many` is over: settle what it left pending and free its caches."""
        ...

    def served(self, context: Context, arms: NDArray[np.int64], *, coherence: bool = True) -> Served | None:
        """How near the request comes to the requests each of `arms` worked for (None: not kept); without
        `coherence`, how alike those are is left out (−1), which costs the most."""
        ...

    def failed_near(self, context: Context, within: float) -> int | None:
        """How many requests seen only failing, on any arm, lie within `within` (cosine) of this one (None:
        not kept)."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state(self, state: dict[str, Any]) -> None: ...

    def nbytes(self) -> int:
        """Memory of the learned arrays, in bytes."""
        ...


class PolicyBase:
    """The no-ops of what a policy does not declare (the Policy protocol's defaults)."""

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities] = Capabilities()
    health: dict[int, float]

    def __init__(self) -> None:
        self.health = {}

    def learn_many(self, lessons: Lessons, rng: np.random.Generator) -> None:
        raise NotImplementedError(f"{self.name} learns a run one call at a time (capabilities.learn_many is off)")

    def replay(self, batch: Batch) -> NDArray[np.float64]:
        raise NotImplementedError(f"{self.name} does not replay (capabilities.replay is off)")

    def forget(self, arm: int) -> None:
        """Counts and tables keep their history: a tabular policy's estimates move with new evidence."""

    def set_health(self, arm: int, success_rate: float | None) -> None:
        """Only a policy that declares `capabilities.health` ranks by it."""

    def finish_batches(self) -> None:
        """Nothing is left pending by a policy that learns every call at once."""

    def served(self, context: Context, arms: NDArray[np.int64], *, coherence: bool = True) -> Served | None:
        """Only a policy that keeps the requests each tool worked for (the outcome model) can say."""
        return None

    def failed_near(self, context: Context, within: float) -> int | None:
        """Likewise: only a policy that keeps requests by outcome can count those that failed."""
        return None


def rank(scores: NDArray[np.float64], rng: np.random.Generator) -> tuple[NDArray[np.int64], int, int]:
    """Indices by score, best first (stable), the index of a maximum with ties broken uniformly by
    `rng`, and how many indices tie for the maximum."""
    order = np.argsort(-scores, kind="stable")
    first = int(order[0])
    if len(order) == 1 or scores[order[1]] != scores[first]:  # the usual case: one best
        return order, first, 1
    ties = int(np.count_nonzero(scores == scores[first]))
    return order, int(order[rng.integers(ties)]), ties


def called_at(candidates: NDArray[np.int64], arm: int) -> int:
    """Where the called `arm` stands among a call's `candidates` (its first place); a call of a tool it did not
    choose among is refused, naming the arm."""
    at = np.flatnonzero(candidates == arm)
    if not len(at):
        raise ValueError(f"the called arm {arm} is not among the candidates")
    return int(at[0])


def best_k(scores: NDArray[np.float64], k: int) -> NDArray[np.intp]:
    """Where the `k` best `scores` are, in no order: the shortlist a policy ranks and explores among."""
    return np.argpartition(-scores, k - 1)[:k]


def ranked_selection(
    arms: NDArray[np.int64],
    scores: NDArray[np.float64],
    expected: NDArray[np.float64],
    order: NDArray[np.int64],
    chosen_index: int,
    explored: bool,
    propensity: float,
) -> Selection:
    """A Selection with arms in `order` (best score first) but the chosen one at the top."""
    if order[0] != chosen_index:
        order = np.concatenate(([chosen_index], order[order != chosen_index]))
    return Selection(
        arms.take(order), scores.take(order), expected.take(order), int(arms[chosen_index]), explored, propensity
    )


def optimistic_selection(
    arms: NDArray[np.int64],
    means: NDArray[np.float64],
    width: NDArray[np.float64],
    alpha: float,
    epsilon: float,
    rng: np.random.Generator,
) -> Selection:
    """UCB with ε: the arm maximising mean + α·width (ties broken by `rng`), or with probability ε one
    drawn uniformly (a draw is made even at ε = 0: the same RNG stream whatever ε); explored when the
    pick is not the best mean."""
    ucb = width * alpha
    ucb += means
    order, best, ties = rank(ucb, rng)
    explored = bool(rng.random() < epsilon)
    pick = int(rng.integers(len(arms))) if explored else best
    propensity = epsilon / len(arms) + ((1 - epsilon) / ties if pick == best or ucb[pick] == ucb[best] else 0.0)
    explored = explored or pick != int(means.argmax())
    return ranked_selection(arms, ucb, means, order, pick, explored, propensity)


def sampled_selection(
    arms: NDArray[np.int64], means: NDArray[np.float64], stds: NDArray[np.float64], rng: np.random.Generator
) -> Selection:
    """Thompson sampling: each arm's reward drawn from N(mean, std²), the best draw picked (ties broken by
    `rng`), its propensity estimated by sampling; explored when the pick is not the best mean."""
    draws = rng.normal(means, stds)
    order, pick, _ = rank(draws, rng)
    propensity = sampled_propensity(means, stds, pick, rng)
    return ranked_selection(arms, draws, means, order, pick, pick != int(means.argmax()), propensity)


def sampled_propensity(
    means: NDArray[np.float64], stds: NDArray[np.float64], chosen: int, rng: np.random.Generator, draws: int = 256
) -> float:
    """Probability that Gaussian sampling picks `chosen`, estimated with `draws` vectorised samples."""
    samples = rng.normal(means, stds, size=(draws, len(means)))
    return float(np.mean(samples.argmax(axis=1) == chosen))


def state_head(name: str, schema: int, config: Any) -> dict[str, Any]:
    """What leads a policy's `state_dict`: the policy's name, schema and config (`check_state` reads them back)."""
    return {"policy": name, "schema": schema, "config": asdict(config)}


def check_state(state: dict[str, Any], name: str, schema: int) -> None:
    if state.get("policy") != name or state.get("schema") != schema:
        raise ValueError(
            f"state is for policy {state.get('policy')!r} schema {state.get('schema')}, not {name!r} schema {schema}"
        )


def baseline_selection(arms: NDArray[np.int64], prior: NDArray[np.float64]) -> Selection:
    """The deterministic baseline: arms by prior (lexical relevance), ties by id; never explores."""
    order = np.lexsort((arms, -prior))
    return Selection(arms.take(order), prior.take(order), prior.take(order), int(arms[order[0]]), False, 1.0)
