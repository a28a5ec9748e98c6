"""The learner's settings: which policy, the reward's weights, the context, replay, sequences, the prior's
mix, exploration and "nothing fits"; checked when made."""

from __future__ import annotations

from dataclasses import dataclass, field

from toolwise.rl.context import ContextEncoder
from toolwise.rl.exploration import ExplorationConfig
from toolwise.rl.fit import FitConfig
from toolwise.rl.policies import POLICIES, PolicyConfig
from toolwise.rl.reward import RewardWeights


@dataclass(frozen=True, slots=True)
class LearnerConfig:
    policy: str = "outcome"
    policy_config: PolicyConfig | None = None
    reward: RewardWeights = field(default_factory=RewardWeights)
    encoder: ContextEncoder = field(default_factory=ContextEncoder)
    replay_capacity: int = 10_000
    replay_alpha: float = 0.6
    replay_batch: int = 32
    replay_every: int = 10
    sequence_n: int = 3
    sequence_min_count: int = 2
    replay_enabled: bool = True  # capability flags: off, that part neither learns nor serves
    sequences_enabled: bool = True
    lexical_weight: float = 0.25  # with an embedder: BM25 over the tool documents added to the cosine, this much
    exploration: ExplorationConfig = field(default_factory=ExplorationConfig)
    fit: FitConfig = field(default_factory=FitConfig)  # when a decision says no tool fits (rl/fit.py)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {self.policy!r}")
        if self.lexical_weight < 0:
            raise ValueError(f"lexical_weight must be ≥ 0, got {self.lexical_weight}")
        if self.replay_batch < 1 or self.replay_every < 1:
            raise ValueError(f"replay_batch and replay_every must be ≥ 1, got {self.replay_batch}, {self.replay_every}")
