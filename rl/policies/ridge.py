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
    def __init__(self, config: RidgeConfig) -> None:
        self.config = config
        self.theta = np.zeros((16, config.dim))
        self.a = np.full((16, config.dim), config.regularisation)
        self.mean_reward = config.neutral
        self.observed = 0

    def ensure_arms(self, arms: NDArray[np.int64]) -> None:
        if len(arms) and int(arms.max()) >= self.theta.shape[0]:
            rows = max(2 * self.theta.shape[0], int(arms.max()) + 1)
            theta = np.zeros((rows, self.config.dim))
            a = np.full((rows, self.config.dim), self.config.regularisation)
            theta[: self.theta.shape[0]], a[: self.a.shape[0]] = self.theta, self.a
            self.theta, self.a = theta, a

    def baseline(self, prior: NDArray[np.float64]) -> NDArray[np.float64]:
        c = self.config
        return self.mean_reward + c.prior_weight * (prior - 0.5)

    def mean_and_width(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Expected normalised reward of each arm and sqrt(xᵀA⁻¹x), the width of its confidence."""
        self.ensure_arms(arms)
        idx, x = context.indices, context.values
        rows = arms[:, None]
        theta_x = self.theta[rows, idx] @ x
        width = np.sqrt((1.0 / self.a[rows, idx]) @ (x * x))
        return self.baseline(prior) + theta_x, width

    def shortlist(self, means: NDArray[np.float64]) -> NDArray[np.int64]:
        """Indices of the best `shortlist` means (all when there are fewer arms)."""
        k = self.config.shortlist
        if len(means) <= k:
            return np.arange(len(means))
        return np.argpartition(-means, k - 1)[:k]

    def update(self, context: Context, arm: int, reward: float, prior: float) -> float:
        """One step towards `reward` (normalised); returns the prediction error before the step."""
        self.ensure_arms(np.array([arm]))
        idx, x = context.indices, context.values
        c = self.config
        error = reward - (self.mean_reward + c.prior_weight * (prior - 0.5) + float(self.theta[arm, idx] @ x))
        self.observed += 1
        self.mean_reward += (reward - self.mean_reward) / self.observed
        self.a[arm, idx] += x * x
        self.theta[arm, idx] += error * x / self.a[arm, idx]
        return error

    def nbytes(self) -> int:
        return self.a.nbytes + self.theta.nbytes

    def state_dict(self) -> dict[str, Any]:
        return {
            "theta": self.theta.copy(),
            "a": self.a.copy(),
            "mean_reward": self.mean_reward,
            "observed": self.observed,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.theta = np.array(state["theta"], dtype=np.float64)
        self.a = np.array(state["a"], dtype=np.float64)
        self.mean_reward, self.observed = float(state["mean_reward"]), int(state["observed"])
