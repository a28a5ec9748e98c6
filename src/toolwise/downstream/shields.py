"""Shields: keep the learner from recommending tools that are failing or too slow right now, and
stop sending calls to a downstream that keeps failing (a circuit breaker).

Both work on recent observations only, kept in memory: a bounded window per tool, a consecutive
failure count per downstream. Deciding is a set lookup; the (constant) work happens when a call is recorded.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

CircuitState = Literal["closed", "open", "half-open"]


@dataclass(slots=True)
class Circuit:
    """Opens after `threshold` consecutive downstream failures; after `cooldown_s` one probe call
    goes through (half-open): success closes it, failure opens it again."""

    threshold: int
    cooldown_s: float
    state: CircuitState = "closed"
    failures: int = 0
    opened_at: float = 0.0
    opened: int = 0  # times it opened

    def admit(self, now: float) -> float | None:
        """None when a call may go through; else the seconds left before the next probe."""
        if self.state == "closed":
            return None
        if self.state == "open" and now - self.opened_at >= self.cooldown_s:
            self.state = "half-open"
            return None
        if self.state == "half-open":
            return self.cooldown_s  # a probe is in flight: the others wait for its verdict
        return self.cooldown_s - (now - self.opened_at)

    def succeeded(self) -> None:
        self.state, self.failures = "closed", 0

    def failed(self, now: float) -> None:
        self.failures += 1
        if self.state == "half-open" or self.failures >= self.threshold:
            if self.state != "open":
                self.opened += 1
            self.state, self.opened_at = "open", now


@dataclass(frozen=True, slots=True)
class Budget:
    max_failure_rate: float | None  # drop a tool failing more often than this in its window
    max_p95_latency_ms: float | None  # drop a tool whose p95 latency in its window is above this
    window: int = 20
    min_calls: int = 5  # judge a tool only after this many calls in its window
    retry_after_s: float = 60.0  # a dropped tool is given another chance (its window forgotten) after this


@dataclass(slots=True)
class _Window:
    """A tool's latest calls, with their failures counted as they come and go (O(1) per call)."""

    size: int
    calls: deque[tuple[bool, float]] = field(default_factory=deque)
    failures: int = 0

    def add(self, success: bool, latency_ms: float) -> None:
        if len(self.calls) == self.size:
            self.failures -= not self.calls.popleft()[0]
        self.calls.append((success, latency_ms))
        self.failures += not success

    def clear(self) -> None:
        self.calls.clear()
        self.failures = 0

    def p95_ms(self) -> float:
        """95th percentile latency, interpolated linearly between ranks (as numpy's default)."""
        ranked = sorted(latency for _, latency in self.calls)
        k = (len(ranked) - 1) * 0.95
        low = int(k)
        high = min(low + 1, len(ranked) - 1)
        return ranked[low] + (ranked[high] - ranked[low]) * (k - low)


@dataclass
class Shields:
    budget: Budget
    _recent: dict[str, _Window] = field(default_factory=dict)
    _blocked: dict[str, tuple[str, float]] = field(default_factory=dict)  # tool → (why, since)

    def observe(self, tool: str, success: bool, latency_ms: float, now: float) -> None:
        window = self._recent.get(tool)
        if window is None:
            window = self._recent[tool] = _Window(self.budget.window)
        window.add(success, latency_ms)
        reason = self._breach(window)
        if reason is None:
            self._blocked.pop(tool, None)
        elif tool not in self._blocked:
            self._blocked[tool] = (reason, now)

    def blocked(self, now: float) -> dict[str, str]:
        """Tools to leave out of recommendations now, with why."""
        for tool, (_, since) in list(self._blocked.items()):
            if now - since >= self.budget.retry_after_s:
                del self._blocked[tool]
                self._recent[tool].clear()
        return {tool: why for tool, (why, _) in self._blocked.items()}

    def _breach(self, window: _Window) -> str | None:
        calls = len(window.calls)
        if calls < self.budget.min_calls:
            return None
        failure_rate = window.failures / calls
        limit = self.budget.max_failure_rate
        if limit is not None and failure_rate > limit:
            return f"failure rate {failure_rate:.0%} over the last {calls} calls (budget {limit:.0%})"
        slow = self.budget.max_p95_latency_ms
        if slow is not None and (p95 := window.p95_ms()) > slow:
            return f"p95 latency {p95:.0f} ms over the last {calls} calls (budget {slow:.0f} ms)"
        return None
