"""The design card's policy: ε-greedy around UCB1 over context hashes, learning Q by Q-learning.

With probability ε an arm is chosen uniformly; otherwise the arm maximising
squash(Q(s,a)) + c·sqrt(ln N(s) / n(s,a)), untried arms first, ties broken by the RNG.
ε decays ×decay per selection down to a floor. Q(s,a) ← Q + α[r + γ·max Q(s',·) − Q] (no future
term on a terminal step); squash(Q) = Q·(1 − γ), the discounted return's bound, so it lies in [0, 1].
"""

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
    rank,
    ranked_selection,
    state_head,
)
from toolwise.rl.policies.tabular import Table
from toolwise.rl.replay import Batch, Transition


@dataclass(frozen=True, slots=True)
class UCBConfig:
    c: float = 2.0
    epsilon: float = 1.0
    epsilon_decay: float = 0.995
    epsilon_min: float = 0.01
    learning_rate: float = 0.1
    discount: float = 0.9

    def __post_init__(self) -> None:
        if self.c < 0:
            raise ValueError(f"c must be ≥ 0, got {self.c}")
        if not 0 <= self.epsilon_min <= self.epsilon <= 1:
            raise ValueError(f"need 0 ≤ epsilon_min ≤ epsilon ≤ 1, got {self.epsilon_min}, {self.epsilon}")
        if not 0 < self.epsilon_decay <= 1:
            raise ValueError(f"epsilon_decay must be in (0, 1], got {self.epsilon_decay}")
        if not 0 < self.learning_rate <= 1 or not 0 <= self.discount < 1:
            raise ValueError(
                f"need 0 < learning_rate ≤ 1 and 0 ≤ discount < 1, got {self.learning_rate}, {self.discount}"
            )


class TabularUCB(PolicyBase):
    name: ClassVar[str] = "ucb"
    SCHEMA: ClassVar[int] = 1
    capabilities: ClassVar[Capabilities] = Capabilities(next_context=True, replay=True)

    def __init__(self, config: UCBConfig | None = None) -> None:
        super().__init__()
        self.config = config or UCBConfig()
        self.epsilon = self.config.epsilon
        self.table = Table()

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        q, n, total = self.table.gather(context, arms)
        with np.errstate(divide="ignore", invalid="ignore"):
            bonus = self.config.c * np.sqrt(np.log(max(total, 1)) / n)
        scores = np.where(n == 0, np.inf, q * (1 - self.config.discount) + bonus)
        order, best, ties = rank(scores, rng)
        eps = self.epsilon
        explored = bool(rng.random() < eps)
        index = int(rng.integers(len(arms))) if explored else best
        greedy_share = (1 - eps) / ties if np.isclose(scores[index], scores[best]) else 0.0
        self.epsilon = max(self.config.epsilon_min, eps * self.config.epsilon_decay)
        return ranked_selection(arms, scores, q, order, index, explored, eps / len(arms) + greedy_share)

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.table.gather(context, arms)[0]

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        row, arm, reward = self.table.row(lesson.context), lesson.arm, lesson.reward
        nxt = -1 if lesson.next_context is None else self.table.row(lesson.next_context)
        self.table.ensure_arms(np.array([arm]))
        transition = Transition(row, arm, reward, nxt)
        td = self._td(np.array([row]), np.array([arm]), np.array([reward]), np.array([nxt]), np.ones(1))
        self.table.counts[row, arm] += 1
        self.table.visits[row] += 1
        return Update(float(td[0]), transition)

    def replay(self, batch: Batch) -> NDArray[np.float64]:
        t = batch.transitions
        return self._td(
            np.array([x.context for x in t]),
            np.array([x.tool for x in t]),
            np.array([x.reward for x in t]),
            np.array([x.next_context for x in t]),
            batch.weights,
        )

    def _td(
        self,
        rows: NDArray[np.int64],
        arms: NDArray[np.int64],
        rewards: NDArray[np.float64],
        nxt: NDArray[np.int64],
        weights: NDArray[np.float64],
    ) -> NDArray[np.float64]:
        """Vectorised Q-learning step (importance-weighted); returns the TD errors before the step."""
        values = self.table.values
        future = np.where(nxt >= 0, values[np.maximum(nxt, 0)].max(axis=1), 0.0)
        td = rewards + self.config.discount * future - values[rows, arms]
        np.add.at(values, (rows, arms), (self.config.learning_rate * weights * td).astype(np.float32))
        return td

    def state_dict(self) -> dict[str, Any]:
        return {
            **state_head(self.name, self.SCHEMA, self.config),
            "epsilon": self.epsilon,
            "table": self.table.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        check_state(state, self.name, self.SCHEMA)
        self.config = UCBConfig(**state["config"])
        self.epsilon = float(state["epsilon"])
        self.table.load_state(state["table"])

    def nbytes(self) -> int:
        return self.table.nbytes()
