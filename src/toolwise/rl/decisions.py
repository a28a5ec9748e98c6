"""What the learner answers for a request: a decision (its id, the tools ranked, the one chosen) that
the calls which follow it are attributed to."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(slots=True)
class Ranked:
    tool: str
    score: float
    expected: float  # exploitation estimate in [0, 1]: P(works) (outcome) or expected normalised reward
    prior: float  # lexical relevance in [0, 1]
    p_agent: float | None = None  # the probability the agent calls it here (policies that model the agent)
    evidence: float | None = None  # the calls (kernel-weighted) `expected` rests on (outcome)


@dataclass(slots=True)
class Decision:
    decision_id: str
    policy: str
    context_hash: str
    chosen: str
    ranked: list[Ranked]
    explored: bool
    propensity: float
    nothing_fits: bool = False  # no candidate seems to serve the query (rl/fit.py); `ranked` holds the best guesses
    learned: int = 0  # the deciding learner's updates: the calls its probabilities rest on (not a later state's)


def decision_id(rng: np.random.Generator) -> str:
    """A UUID4 drawn from `rng` (reproducible under a seed; 128 raw bits, cheaper than rng.bytes)."""
    high, low = rng.bit_generator.random_raw(2).tolist()
    high = (high & ~0xF000) | 0x4000  # version 4
    low = (low & ~(0xC000 << 48)) | (0x8000 << 48)  # RFC 4122 variant
    text = f"{high:016x}{low:016x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
