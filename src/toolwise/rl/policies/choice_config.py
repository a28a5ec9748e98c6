"""The choice model's settings (rl/policies/choice.py), checked when they are made."""

from __future__ import annotations

from dataclasses import dataclass

from toolwise.rl.policies.base import FEATURES


@dataclass(frozen=True, slots=True)
class ChoiceConfig:
    dim: int = 128  # leading embedding components θ learns over
    shortlist: int = 20  # the softmax's candidates: the best-scored tools (plus the called one)
    learning_rate: float = 4.0  # per-tool θ (AdaGrad: divided by √(1 + Σ steps²) of the tool)
    shrinkage: float = 2.0  # θ_tᵀx counts (n + 1)/(n + 1 + this) after n calls of t: thin evidence, the prior
    weight_rate: float = 0.1  # the feature weights w (AdaGrad per feature)
    initial_weights: tuple[float, ...] = (20.0, 5.0, 1.0, 0.5, 0.0)
    passed_over_weight: float = 0.1  # a recommendation the agent did not follow, against a failed call's 1
    replays: int = 8  # past calls learned again after each call (SGD's second look; 0: off)
    replay_capacity: int = 4096  # the most recent calls kept for that
    batch_replays: int = 4  # the same in runs (minibatches: a replay of the log, the learning thread behind)
    epsilon: float = 0.0  # uniform choice over the shortlist (exploration for toolwise's own picks)

    def __post_init__(self) -> None:
        if self.shrinkage < 0:
            raise ValueError(f"need shrinkage ≥ 0, got {self.shrinkage}")
        if self.dim < 8 or self.shortlist < 2:
            raise ValueError(f"need dim ≥ 8 and shortlist ≥ 2, got {self.dim}, {self.shortlist}")
        if self.replays < 0 or self.batch_replays < 0 or self.replay_capacity < 1:
            raise ValueError(f"need replays ≥ 0 and replay_capacity ≥ 1, got {self.replays}, {self.replay_capacity}")
        if self.learning_rate < 0 or self.weight_rate < 0 or not 0 <= self.passed_over_weight <= 1:
            raise ValueError(
                "need learning_rate ≥ 0, weight_rate ≥ 0, 0 ≤ passed_over_weight ≤ 1; got "
                f"{self.learning_rate}, {self.weight_rate}, {self.passed_over_weight}"
            )
        if len(self.initial_weights) != len(FEATURES):
            raise ValueError(f"initial_weights needs {len(FEATURES)} values ({', '.join(FEATURES)})")
        if not 0 <= self.epsilon <= 1:
            raise ValueError(f"need 0 ≤ epsilon ≤ 1, got {self.epsilon}")
