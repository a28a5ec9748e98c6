"""The semantic residual's settings (rl/policies/semantic.py), checked when they are made, and the
previous tool's bucket its session-context block learns under."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SemanticConfig:
    dim: int = 128  # leading embedding components the residual learns over
    regularisation: float = 1.0  # λ
    prior_weight: float = (
        0.7  # β: about the normalised reward gap between a success and a failure, × (1 + lexical_weight)
    )
    alpha: float = 0.05  # exploration bonus per unit of (diagonal) confidence width
    epsilon: float = 0.0  # uniform choice over the shortlist (off: it cost 1–2 points of accuracy on real requests)
    shortlist: int = 20
    previous_buckets: int = 256  # hashed one-hot of the previous tool (0: the session context is not learned)

    def __post_init__(self) -> None:
        if self.dim < 8 or self.regularisation <= 0 or self.shortlist < 1 or self.alpha < 0:
            raise ValueError(
                f"need dim ≥ 8, regularisation > 0, shortlist ≥ 1, alpha ≥ 0; "
                f"got {self.dim}, {self.regularisation}, {self.shortlist}, {self.alpha}"
            )
        if self.previous_buckets < 0:
            raise ValueError(f"need previous_buckets ≥ 0, got {self.previous_buckets}")
        if not 0 <= self.prior_weight <= 2 or not 0 <= self.epsilon <= 1:
            raise ValueError(f"need 0 ≤ prior_weight ≤ 2 and 0 ≤ epsilon ≤ 1, got {self.prior_weight}, {self.epsilon}")


def previous_bucket(previous_tool: str, buckets: int) -> int:
    """A previous tool's stable bucket (BLAKE2b, never `hash()`: the same across processes)."""
    digest = hashlib.blake2b(f"prev={previous_tool}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") % buckets
