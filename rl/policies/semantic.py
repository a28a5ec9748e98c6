"""The semantic residual: per-tool ridge regression over the query's embedding, on top of the prior.

A tool's expected (normalised) reward for a query q is

    m_t(q) = c + β·prior_t(q) + θ_tᵀ x(q)

where prior_t is the semantic relevance of the tool to the query (cosine of their embeddings, see
`Learner.prior`), c is the running mean of the residual target r − β·prior over every observation (a
shared intercept: what the prior misses on average), and θ_t is tool t's ridge regression of the
residual on x(q), the first `dim` components of the query's embedding (the embedding is Matryoshka-
trained: its leading components are a coarser embedding of their own), L2-normalised.

Why this shape: a failed call of t for q lowers θ_tᵀx only for queries whose x points the same way
("not this tool for this kind of request"), never t everywhere (no per-tool bias term), and never
another tool; a success lifts t for that kind of request. Without an embedding (no embedder given to
the learner) x is the context's hashed feature vector folded onto `dim` components.

Memory: a full per-tool precision matrix over 256 components is 512 KB a tool (524 MB for 1,000
tools). Here A_t = λI + Σ x xᵀ is kept over `dim` = 128 components as its upper triangle in float32
(33 KB a tool) and θ_t is re-solved from it on each update of t (one 128×128 solve, off the call's
path); deciding reads only θ (one matrix-vector product over all tools) and diag(A) for the widths.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context
from toolwise.rl.policies.base import Selection, Update, check_state, rank, ranked_selection
from toolwise.rl.replay import Batch


@dataclass(frozen=True, slots=True)
class SemanticConfig:
    dim: int = 128  # leading embedding components the residual learns over
    regularisation: float = 1.0  # λ
    prior_weight: float = 0.55  # β: about the normalised reward gap between a success and a failure
    alpha: float = 0.05  # exploration bonus per unit of (diagonal) confidence width
    epsilon: float = 0.0  # uniform choice over the shortlist (off: it cost 1–2 points of accuracy on real requests)
    shortlist: int = 20

    def __post_init__(self) -> None:
        if self.dim < 8 or self.regularisation <= 0 or self.shortlist < 1 or self.alpha < 0:
            raise ValueError(
                f"need dim ≥ 8, regularisation > 0, shortlist ≥ 1, alpha ≥ 0; "
                f"got {self.dim}, {self.regularisation}, {self.shortlist}, {self.alpha}"
            )
        if not 0 <= self.prior_weight <= 2 or not 0 <= self.epsilon <= 1:
            raise ValueError(f"need 0 ≤ prior_weight ≤ 2 and 0 ≤ epsilon ≤ 1, got {self.prior_weight}, {self.epsilon}")


class SemanticUCB:
    name: ClassVar[str] = "semantic"
    SCHEMA: ClassVar[int] = 1
    uses_next_context: ClassVar[bool] = False

    def __init__(self, config: SemanticConfig | None = None) -> None:
        self.config = c = config or SemanticConfig()
        self._upper = np.triu_indices(c.dim)
        self._diagonal = np.flatnonzero(self._upper[0] == self._upper[1])  # where A_ii sits in a packed row
        self._identity = np.eye(c.dim)[self._upper].astype(np.float32)
        self.theta = np.zeros((16, c.dim))
        self.b = np.zeros((16, c.dim))
        self.a = np.repeat(self._identity[None] * c.regularisation, 16, 0)  # packed upper triangles
        self.a_diag = np.full((16, c.dim), c.regularisation)
        self.intercept = 0.0
        self.observed = 0

    # -- features ----------------------------------------------------------------------------------

    def features(self, context: Context) -> NDArray[np.float64]:
        """x(q): the leading `dim` embedding components (or folded hashed features), unit length."""
        dim = self.config.dim
        if context.embedding is not None:
            x = np.asarray(context.embedding[:dim], dtype=np.float64)
            if len(x) < dim:
                x = np.concatenate([x, np.zeros(dim - len(x))])
        else:
            x = np.zeros(dim)
            np.add.at(x, context.indices % dim, context.values)
        norm = math.sqrt(float(x @ x))
        return x / norm if norm else x

    def _ensure(self, arm: int) -> None:
        rows = self.theta.shape[0]
        if arm < rows:
            return
        grow = max(2 * rows, arm + 1) - rows
        c = self.config
        self.theta = np.concatenate([self.theta, np.zeros((grow, c.dim))])
        self.b = np.concatenate([self.b, np.zeros((grow, c.dim))])
        self.a = np.concatenate([self.a, np.repeat(self._identity[None] * c.regularisation, grow, 0)])
        self.a_diag = np.concatenate([self.a_diag, np.full((grow, c.dim), c.regularisation)])

    # -- deciding ----------------------------------------------------------------------------------

    def _means(
        self, x: NDArray[np.float64], arms: NDArray[np.int64], prior: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        if len(arms):
            self._ensure(int(arms.max()))
        means = (self.theta @ x).take(arms)
        means += prior * self.config.prior_weight
        means += self.intercept
        return means

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._means(self.features(context), arms, prior)

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        c = self.config
        x = self.features(context)
        means = self._means(x, arms, prior)
        if len(means) > c.shortlist:
            short = np.argpartition(-means, c.shortlist - 1)[: c.shortlist]
            arms, means = arms.take(short), means.take(short)
        # Width from diag(A): cheap (no solve per arm) and shrinking as a tool is tried on such queries.
        width = np.sqrt((x * x) @ (1.0 / self.a_diag.take(arms, 0)).T)
        ucb = width * c.alpha
        ucb += means
        order, best, ties = rank(ucb, rng)
        explored = bool(rng.random() < c.epsilon)
        pick = int(rng.integers(len(arms))) if explored else best
        propensity = c.epsilon / len(arms) + ((1 - c.epsilon) / ties if ucb[pick] == ucb[best] else 0.0)
        explored = explored or pick != int(means.argmax())
        return ranked_selection(arms, ucb, means, order, pick, explored, propensity)

    # -- learning ----------------------------------------------------------------------------------

    def update(self, context: Context, arm: int, reward: float, next_context: Context | None, prior: float) -> Update:
        """Ridge step for `arm` towards the residual reward − β·prior (centred by the running intercept)."""
        self._ensure(arm)
        c = self.config
        x = self.features(context)
        target = reward - c.prior_weight * prior
        error = target - self.intercept - float(self.theta[arm] @ x)
        self.observed += 1
        self.intercept += (target - self.intercept) / self.observed
        packed = self.a[arm]
        packed += np.outer(x, x)[self._upper].astype(np.float32)
        self.a_diag[arm] = packed[self._diagonal]
        self.b[arm] += (target - self.intercept) * x
        full = np.zeros((c.dim, c.dim))
        full[self._upper] = packed
        full = full + np.triu(full, 1).T
        self.theta[arm] = np.linalg.solve(full, self.b[arm])
        return Update(error, None)

    def replay(self, batch: Batch) -> NDArray[np.float64]:
        raise NotImplementedError(f"{self.name} keeps exact sufficient statistics; replaying would double-count")

    # -- state -------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "policy": self.name,
            "schema": self.SCHEMA,
            "config": asdict(self.config),
            "theta": self.theta.copy(),
            "b": self.b.copy(),
            "a": self.a.copy(),
            "intercept": self.intercept,
            "observed": self.observed,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        check_state(state, self.name, self.SCHEMA)
        a = np.asarray(state["a"], dtype=np.float32)
        if a.shape[1:] != (len(self._upper[0]),):
            learned = state["config"]["dim"]
            raise ValueError(f"state learned over {learned} components, this policy uses {self.config.dim}")
        self.a = a.copy()
        self.a_diag = a[:, self._diagonal].astype(np.float64)
        self.theta = np.asarray(state["theta"], dtype=np.float64).copy()
        self.b = np.asarray(state["b"], dtype=np.float64).copy()
        self.intercept, self.observed = float(state["intercept"]), int(state["observed"])

    def nbytes(self) -> int:
        return self.theta.nbytes + self.b.nbytes + self.a.nbytes + self.a_diag.nbytes
