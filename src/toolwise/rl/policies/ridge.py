"""Per-tool linear reward model over the hashed context features, with a diagonal precision matrix.

Each tool a keeps weights θ_a and the diagonal of A_a = λI + Σ x xᵀ; the state is 2·tools·d floats
and a score touches only the context's non-zero features: O(tools · nnz) per decision. θ moves by the
prediction error with per-feature steps 1/A_ii (recursive least squares on the diagonal): solving each
feature on its own (θ_i = b_i / A_ii) would let every active feature claim the whole reward and
inflate predictions by the number of features.
The linear part learns the residual over m(prior) = r̄ + β·(prior − ½), where r̄ is the running
mean of every reward observed (`neutral` until the first): a fresh install ranks by lexical
relevance and feedback refines it; an untried tool is assumed average, so a below-average outcome
(a failure, or a call the user rated 1) pushes a tool below the untried ones and an above-average
one lifts it. The diagonal is the usual large-scale
approximation of LinUCB/LinTS (it drops feature correlations); with hashed, L2-normalised sparse
features they are small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context


@dataclass(frozen=True, slots=True)
class RidgeConfig:
    dim: int = 256
    regularisation: float = 1.0
    prior_weight: float = 0.3  # β: how much the lexical prior counts, in normalised reward units
    neutral: float = 0.5  # the reward assumed average before any is observed
    shortlist: int = 20  # arms re-ranked with exploration: the best `shortlist` by expected reward

    def __post_init__(self) -> None:
        if self.dim < 8 or self.regularisation <= 0 or self.shortlist < 1 or not 0 <= self.prior_weight <= 1:
            raise ValueError(
                f"need dim ≥ 8, regularisation > 0, shortlist ≥ 1, 0 ≤ prior_weight ≤ 1; "
                f"got {self.dim}, {self.regularisation}, {self.shortlist}, {self.prior_weight}"
            )


class DiagonalRidge:
    """θ, diag(A) and its reciprocal are stored feature-major, (dim, tools): a decision takes the
    context's few feature rows, each contiguous over all tools, with two `take`s and two dot products
    (a decision is a handful of numpy calls, whatever the catalogue size)."""

    def __init__(self, config: RidgeConfig) -> None:
        self.config = config
        self.theta = np.zeros((config.dim, 16))
        self.a = np.full((config.dim, 16), config.regularisation)
        self.inv_a = 1.0 / self.a
        self.mean_reward = config.neutral
        self.observed = 0

    def ensure_arms(self, arms: NDArray[np.int64]) -> None:
        if len(arms):
            self._ensure(int(arms[arms.argmax()]))

    def _ensure(self, arm: int) -> None:
        if arm >= self.theta.shape[1]:
            cols = max(2 * self.theta.shape[1], arm + 1)
            theta = np.zeros((self.config.dim, cols))
            a = np.full((self.config.dim, cols), self.config.regularisation)
            theta[:, : self.theta.shape[1]], a[:, : self.a.shape[1]] = self.theta, self.a
            self.theta, self.a, self.inv_a = theta, a, 1.0 / a

    def mean_and_width(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Expected normalised reward of each arm and sqrt(xᵀA⁻¹x), the width of its confidence."""
        idx, c = context.indices, self.config
        try:
            theta_x = (context.values @ self.theta.take(idx, 0)).take(arms)
        except IndexError:  # an arm the arrays have no column for yet: a tool new since they were sized
            self.ensure_arms(arms)
            theta_x = (context.values @ self.theta.take(idx, 0)).take(arms)
        means = prior * c.prior_weight
        means += theta_x
        means += self.mean_reward - 0.5 * c.prior_weight
        width = np.sqrt((context.squares @ self.inv_a.take(idx, 0)).take(arms))
        return means, width

    def update(self, context: Context, arm: int, reward: float, prior: float) -> float:
        """One step towards `reward` (normalised); returns the prediction error before the step."""
        self._ensure(arm)
        idx, x = context.indices, context.values
        c = self.config
        theta = self.theta[:, arm]  # a view of the arm's column
        error = reward - (self.mean_reward + c.prior_weight * (prior - 0.5) + float(x @ theta.take(idx)))
        self.observed += 1
        self.mean_reward += (reward - self.mean_reward) / self.observed
        a_column, inv_column = self.a[:, arm], self.inv_a[:, arm]
        a = a_column.take(idx) + context.squares
        inv = 1.0 / a
        a_column[idx] = a
        inv_column[idx] = inv
        theta[idx] += error * x * inv
        return error

    def nbytes(self) -> int:
        return self.a.nbytes + self.inv_a.nbytes + self.theta.nbytes

    def state_dict(self) -> dict[str, Any]:
        """Tool-major (tools, dim) arrays, the layout the state schema names."""
        return {
            "theta": self.theta.T.copy(),
            "a": self.a.T.copy(),
            "mean_reward": self.mean_reward,
            "observed": self.observed,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.theta = np.ascontiguousarray(np.asarray(state["theta"], dtype=np.float64).T)
        self.a = np.ascontiguousarray(np.asarray(state["a"], dtype=np.float64).T)
        self.inv_a = 1.0 / self.a
        self.mean_reward, self.observed = float(state["mean_reward"]), int(state["observed"])
