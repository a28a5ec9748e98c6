"""Shields: keep the learner from recommending tools that are failing or too slow right now, and
stop sending calls to a downstream that keeps failing (a circuit breaker).

Both work on recent observations only, kept in memory: a bounded window per tool, a consecutive
failure count per downstream. Deciding is a set lookup; the (constant) work happens when a call is recorded.

A timeout may be the caller's doing (a request that asks for too much) as well as the downstream's, so
one client's timeouts must not cut the downstream off for every client: they open a circuit of that
client's own (its calls fail fast, others' go through), and count towards the downstream's circuit only
once the failing run holds timeouts of `TIMEOUT_CALLERS` clients or a failure that is not a timeout
(the downstream died, refused the connection, is restarting), which is everyone's.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

CircuitState = Literal["closed", "open", "half-open"]
TIMEOUT_CALLERS = 2  # clients whose timeouts, in one run of failures, open a downstream's circuit for all
CALLER_CIRCUITS = 10_000  # clients with timeouts remembered per downstream (closed ones forgotten past it)


@dataclass(slots=True)
class Circuit:
    """Opens after `threshold` consecutive downstream failures; after `cooldown_s` one probe call
    goes through (half-open): success closes it, failure opens it again. A cancelled call is no
    verdict (the client's choice): it counts for nothing, and a cancelled probe lets the next call probe."""

    threshold: int
    cooldown_s: float
    state: CircuitState = "closed"
    failures: int = 0
    opened_at: float = 0.0
    opened: int = 0  # times it opened
    _timed_out: set[str] = field(default_factory=set)  # clients with a timeout in the current run of failures
    _shared: bool = False  # the current run holds a failure that is not a timeout
    _callers: dict[str, Circuit] = field(default_factory=dict)  # each client's own circuit, for its timeouts
    _probe: int = 0  # the probe in flight while half-open (0: none; else its number, `probes`)
    _probes: int = 0  # probes let through so far

    def admit(self, now: float, caller: str | None = None) -> float | None:
        """None when a call (of `caller`) may go through; else the seconds left before the next probe."""
        probe = self._probe
        wait = self._admit(now)
        own = self._callers.get(caller) if caller is not None else None
        if wait is not None or own is None:
            return wait
        refused = own._admit(now)
        if refused is not None and self._probe != probe:  # not let through: the downstream's probe is the next call's
            self._probe = 0
        return refused

    @property
    def probing(self) -> bool:
        """Half-open with its probe in flight: the other calls wait for its verdict."""
        return self.state == "half-open" and self._probe != 0

    def timeouts_of(self, caller: str | None) -> int | None:
        """The timeouts in a row that opened `caller`'s own circuit; None when it is not open."""
        own = self._callers.get(caller) if caller is not None else None
        return own.failures if own is not None and own.state != "closed" else None

    def probes(self, caller: str | None = None) -> list[tuple[Circuit, int]]:
        """Right after `admit` let a call through: the circuits (the downstream's, the caller's own)
        whose probe it is, for `abandoned` should it be cancelled."""
        own = self._callers.get(caller) if caller is not None else None
        return [(c, c._probe) for c in (self, own) if c is not None and c.state == "half-open" and c._probe]

    def _admit(self, now: float) -> float | None:
        if self.state == "closed":
            return None
        if self.state == "open" and now - self.opened_at >= self.cooldown_s:
            self.state = "half-open"
        if self.state == "half-open":
            if self._probe:
                return self.cooldown_s  # a probe is in flight: the others wait for its verdict
            self._probes += 1
            self._probe = self._probes
            return None
        return self.cooldown_s - (now - self.opened_at)

    def succeeded(self, caller: str | None = None) -> None:
        if self.failures or self.state != "closed" or self._shared or self._timed_out:  # else nothing to reset
            self.state, self.failures, self._shared, self._probe = "closed", 0, False, 0
            self._timed_out.clear()
        if caller is not None and self._callers:
            self._callers.pop(caller, None)

    def failed(self, now: float, caller: str | None = None, *, timed_out: bool = False) -> None:
        """A call failed; `timed_out` with a `caller`: the downstream did not answer that client in time
        (opens that client's own circuit; the downstream's only with others', see the module)."""
        own = self._callers.get(caller) if caller is not None else None
        if timed_out and caller is not None:
            if own is None:
                if len(self._callers) >= CALLER_CIRCUITS:
                    self._callers = {c: o for c, o in self._callers.items() if o.state != "closed"}
                own = self._callers[caller] = Circuit(self.threshold, self.cooldown_s)
            own.failed(now)
            self._timed_out.add(caller)
        else:
            self._shared = True
            if own is not None and own.state == "half-open":
                own.failed(now)  # its probe failed too
        self.failures += 1
        everyone = self._shared or len(self._timed_out) >= TIMEOUT_CALLERS
        if self.state == "half-open" or (everyone and self.failures >= self.threshold):
            if self.state != "open":
                self.opened += 1
            self.state, self.opened_at, self._probe = "open", now, 0

    @staticmethod
    def abandoned(probes: list[tuple[Circuit, int]]) -> None:
        """A call ended without a verdict (cancelled: the client's choice, not the downstream failing):
        it counts as no failure; if it was a circuit's probe (`probes`), the next call probes instead."""
        for circuit, probe in probes:
            if circuit.state == "half-open" and circuit._probe == probe:
                circuit._probe = 0


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

    @property
    def active(self) -> bool:
        """Whether any limit is set: without one no tool is ever dropped, so calls need not be watched."""
        return self.budget.max_failure_rate is not None or self.budget.max_p95_latency_ms is not None

    def observe(self, tool: str, success: bool, latency_ms: float, now: float) -> None:
        if not self.active:
            return
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
