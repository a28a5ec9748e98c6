"""What every policy offers (one protocol, so callers never branch on the policy type)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context
from toolwise.rl.replay import Batch, Transition


# Records built on every decision or update (here, in context.py, learner.py, replay.py, sequences.py)
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


@dataclass(slots=True)
class Update:
    td_error: float
    transition: Transition | None  # what to store for replay; None when the policy does not replay


class Policy(Protocol):
    name: ClassVar[str]
    uses_next_context: ClassVar[bool]  # TD learners bootstrap from the next context; bandits do not

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        """Choose among `arms`; `prior[i]` is the lexical relevance of arms[i] in [0, 1]."""
        ...

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        """The exploitation estimate (no exploration) of each arm, normalised reward units."""
        ...

    def update(self, context: Context, arm: int, reward: float, next_context: Context | None, prior: float) -> Update:
        """Learn from one step; `reward` in [0, 1]; `next_context` None when the episode ended."""
        ...

    def replay(self, batch: Batch) -> NDArray[np.float64]:
        """Learn again from replayed transitions weighted by importance; returns their TD errors."""
        ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state(self, state: dict[str, Any]) -> None: ...

    def nbytes(self) -> int:
        """Memory of the learned arrays, in bytes."""
        ...


@runtime_checkable
class BatchPolicy(Policy, Protocol):
    """A policy that also learns a run of steps at once (a replay of the log): what it learns equals
    learning them one by one with `update`."""

    def update_batch(
        self,
        embeddings: NDArray[np.float32],
        rows: NDArray[np.int64],
        arms: NDArray[np.int64],
        previous: Sequence[str | None],
        rewards: NDArray[np.float64],
        priors: NDArray[np.float64],
    ) -> None:
        """Learn a run in order: step i chose `arms[i]` for the query embedded in `embeddings[rows[i]]`
        after `previous[i]`, with normalised reward `rewards[i]` and prior `priors[i]`."""
        ...

    def finish_batches(self) -> None:
        """The batches are over: settle what they left pending and free their caches."""
        ...


def rank(scores: NDArray[np.float64], rng: np.random.Generator) -> tuple[NDArray[np.int64], int, int]:
    """Indices by score, best first (stable), the index of a maximum with ties broken uniformly by
    `rng`, and how many indices tie for the maximum."""
    order = np.argsort(-scores, kind="stable")
    first = int(order[0])
    if len(order) == 1 or scores[order[1]] != scores[first]:  # the usual case: one best
        return order, first, 1
    ties = int(np.count_nonzero(scores == scores[first]))
    return order, int(order[rng.integers(ties)]), ties


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


def sampled_propensity(
    means: NDArray[np.float64], stds: NDArray[np.float64], chosen: int, rng: np.random.Generator, draws: int = 256
) -> float:
    """Probability that Gaussian sampling picks `chosen`, estimated with `draws` vectorised samples."""
    samples = rng.normal(means, stds, size=(draws, len(means)))
    return float(np.mean(samples.argmax(axis=1) == chosen))


def check_state(state: dict[str, Any], name: str, schema: int) -> None:
    if state.get("policy") != name or state.get("schema") != schema:
        raise ValueError(
            f"state is for policy {state.get('policy')!r} schema {state.get('schema')}, not {name!r} schema {schema}"
        )


def baseline_selection(arms: NDArray[np.int64], prior: NDArray[np.float64]) -> Selection:
    """The deterministic baseline: arms by prior (lexical relevance), ties by id; never explores."""
    order = np.lexsort((arms, -prior))
    return Selection(arms.take(order), prior.take(order), prior.take(order), int(arms[order[0]]), False, 1.0)
