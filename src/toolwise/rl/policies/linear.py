"""LinUCB and linear Thompson sampling over the context feature vector, re-ranking a shortlist.

Both score every arm by expected reward (lexical prior + learned residual, see `ridge.py`), keep the
best `shortlist`, and explore only there: LinUCB adds α·width and takes the maximum (with a small ε of
uniform choice over the shortlist so that every shortlisted arm has a non-zero propensity); LinTS draws
each shortlisted arm's reward from N(mean, (v·width)²) and takes the best draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    best_k,
    check_state,
    optimistic_selection,
    sampled_selection,
    state_head,
)
from toolwise.rl.policies.ridge import DiagonalRidge, RidgeConfig


@dataclass(frozen=True, slots=True)
class LinUCBConfig:
    ridge: RidgeConfig = field(default_factory=RidgeConfig)
    alpha: float = 0.3
    epsilon: float = 0.02

    def __post_init__(self) -> None:
        if self.alpha < 0 or not 0 <= self.epsilon <= 1:
            raise ValueError(f"need alpha ≥ 0 and 0 ≤ epsilon ≤ 1, got {self.alpha}, {self.epsilon}")


@dataclass(frozen=True, slots=True)
class LinTSConfig:
    ridge: RidgeConfig = field(default_factory=RidgeConfig)
    scale: float = 0.25

    def __post_init__(self) -> None:
        if self.scale <= 0:
            raise ValueError(f"scale must be > 0, got {self.scale}")


class _Linear(PolicyBase):
    name: ClassVar[str]
    SCHEMA: ClassVar[int] = 1
    capabilities: ClassVar[Capabilities] = Capabilities()  # exact sufficient statistics: a replay would double-count
    config: LinUCBConfig | LinTSConfig

    def __init__(self) -> None:
        super().__init__()
        self.model = DiagonalRidge(self.config.ridge)

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        return self.model.mean_and_width(context, arms, prior)[0]

    def _shortlisted(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
        """The shortlist: the best `shortlist` arms by expected reward, with their expected rewards and
        confidence widths (all arms when there are no more than that)."""
        means, width = self.model.mean_and_width(context, arms, prior)
        k = self.config.ridge.shortlist
        if len(means) <= k:
            return arms, means, width
        short = best_k(means, k)
        return arms.take(short), means.take(short), width.take(short)

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        return Update(self.model.update(lesson.context, lesson.arm, lesson.reward, lesson.prior), None)

    def state_dict(self) -> dict[str, Any]:
        return {
            **state_head(self.name, self.SCHEMA, self.config),
            "model": self.model.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        check_state(state, self.name, self.SCHEMA)
        self.model.load_state(state["model"])

    def nbytes(self) -> int:
        return self.model.nbytes()


class LinUCB(_Linear):
    name: ClassVar[str] = "linucb"

    config: LinUCBConfig

    def __init__(self, config: LinUCBConfig | None = None) -> None:
        self.config = config or LinUCBConfig()
        super().__init__()

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        short, means, width = self._shortlisted(context, arms, prior)
        return optimistic_selection(short, means, width, self.config.alpha, self.config.epsilon, rng)


class LinTS(_Linear):
    name: ClassVar[str] = "lints"

    config: LinTSConfig

    def __init__(self, config: LinTSConfig | None = None) -> None:
        self.config = config or LinTSConfig()
        super().__init__()

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        short, means, width = self._shortlisted(context, arms, prior)
        return sampled_selection(short, means, self.config.scale * width, rng)
