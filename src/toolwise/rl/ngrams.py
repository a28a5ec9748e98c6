"""The records of the n-gram model of tool sequences (`sequences.py`): one n-gram's counts, one
suggestion of what comes next, and how a failed call is marked in a prefix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class NgramStats:
    count: int = 0
    reward_sum: float = 0.0
    successes: int = 0

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.count if self.count else 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.count if self.count else 0.0


@dataclass(slots=True)
class NextTool:
    tool: str
    score: float
    count: int
    success_rate: float
    mean_reward: float
    prefix: tuple[str, ...]
    reason: str
    p_agent: float = 0.0  # P(the agent calls it next), over all calls (`recommend_next`)
    p_works: float = 0.0  # P(that call works), its success counts there shrunk to the tool's own rate


FAILED = "\x00failed"  # marks a prefix's last tool as a call that failed (no MCP tool name holds a NUL)
WORKS_PRIOR = 2.0  # pseudo-calls at the tool's own success rate in `p_works`


def failed(tool: str) -> str:
    """The name a failed call of `tool` has as the last tool of a prefix."""
    return tool + FAILED
