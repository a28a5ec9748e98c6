"""Thompson sampling over context hashes: a Gaussian posterior of each tool's mean normalised reward
per context, seeded by the lexical prior as `prior_strength` pseudo-observations."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context
from toolwise.rl.policies.base import (
    Capabilities,
    Lesson,
    PolicyBase,
    Selection,
    Update,
    check_state,
    sampled_selection,
    state_head,
)
from toolwise.rl.policies.tabular import Table


@dataclass(frozen=True, slots=True)
class ThompsonConfig:
    prior_strength: float = 1.0
    prior_weight: float = 0.3  # prior mean = r̄ + prior_weight·(relevance − ½), r̄ the running mean reward
    neutral: float = 0.5  # r̄ before any reward is observed
    noise: float = 0.3  # posterior std with one observation

    def __post_init__(self) -> None:
        if self.prior_strength <= 0 or self.noise <= 0 or not 0 <= self.prior_weight <= 1:
            raise ValueError(
                f"need prior_strength > 0, noise > 0, 0 ≤ prior_weight ≤ 1; "
                f"got {self.prior_strength}, {self.noise}, {self.prior_weight}"
            )


class TabularThompson(PolicyBase):
    name: ClassVar[str] = "thompson"
    SCHEMA: ClassVar[int] = 1
    capabilities: ClassVar[Capabilities] = Capabilities()  # exact posterior sums: a replay would double-count

    def __init__(self, config: ThompsonConfig | None = None) -> None:
        super().__init__()
        self.config = config or ThompsonConfig()
        self.table = Table()  # values = running sum of rewards
        self.mean_reward, self.observed = self.config.neutral, 0

    def _posterior(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        sums, n, _ = self.table.gather(context, arms)
        k = self.config.prior_strength
        prior_mean = self.mean_reward + self.config.prior_weight * (prior - 0.5)
        return (sums + k * prior_mean) / (n + k), self.config.noise / np.sqrt(n + k)

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        means, stds = self._posterior(context, arms, prior)
        return sampled_selection(arms, means, stds, rng)

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        return self._posterior(context, arms, prior)[0]

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        row, arm, reward = self.table.row(lesson.context), lesson.arm, lesson.reward
        self.table.ensure_arms(np.array([arm]))
        mean_before = self.table.values[row, arm] / max(1, self.table.counts[row, arm])
        self.observed += 1
        self.mean_reward += (reward - self.mean_reward) / self.observed
        self.table.values[row, arm] += reward
        self.table.counts[row, arm] += 1
        self.table.visits[row] += 1
        return Update(float(reward - mean_before), None)

    def state_dict(self) -> dict[str, Any]:
        return {
            **state_head(self.name, self.SCHEMA, self.config),
            "table": self.table.state_dict(),
            "mean_reward": self.mean_reward,
            "observed": self.observed,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        check_state(state, self.name, self.SCHEMA)
        self.config = ThompsonConfig(**state["config"])
        self.table.load_state(state["table"])
        self.mean_reward, self.observed = float(state["mean_reward"]), int(state["observed"])

    def nbytes(self) -> int:
        return self.table.nbytes()
