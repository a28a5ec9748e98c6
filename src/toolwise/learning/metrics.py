"""Prometheus metrics, served at `/metrics` on the HTTP transport.

Per-call figures are counted when a call's deferred work runs, into plain per-tool tallies (a few
integer additions and one bisect per call: no label lookup, no lock); they and the gauges (queue
depth, exploration rate, open circuits, …) become metric families only when `/metrics` is scraped
(`render`, which awaits the gauges: reading the learned state's part waits for the learning thread).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from toolwise.feedback import Execution

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REWARD_BUCKETS = (-8.0, -5.0, -2.0, 0.0, 2.0, 5.0, 8.0, 10.0, 12.0, 14.0, 16.0)

GaugeValues = dict[str, tuple[str, float]]  # name → (help, value)
Gauges = Callable[[], Awaitable[GaugeValues]]


@dataclass(slots=True)
class _Histogram:
    """Observations per bucket (the last one is +Inf) and their sum; cumulated only when scraped."""

    bounds: tuple[float, ...]
    counts: list[int] = field(init=False)
    total: float = 0.0

    def __post_init__(self) -> None:
        self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # bucket bounds are inclusive (le)
        self.total += value

    def buckets(self) -> list[tuple[str, float]]:
        running, out = 0.0, list[tuple[str, float]]()
        for bound, count in zip((*map(str, self.bounds), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


@dataclass(slots=True)
class _ToolTally:
    succeeded: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    latency: _Histogram = field(default_factory=lambda: _Histogram(LATENCY_BUCKETS))


class _Exporter(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # read lazily: nothing is called before the first scrape

    def collect(self) -> Iterator[Metric]:
        m = self.metrics
        calls = CounterMetricFamily("toolwise_calls", "Proxied tool calls by outcome.", labels=["tool", "outcome"])
        errors = CounterMetricFamily(
            "toolwise_call_errors", "Failed proxied calls by error type.", labels=["tool", "error_type"]
        )
        latency = HistogramMetricFamily(
            "toolwise_call_latency_seconds", "Latency of proxied calls, downstream included.", labels=["tool"]
        )
        for tool, tally in sorted(m.tools.items()):
            calls.add_metric([tool, "success"], tally.succeeded)
            calls.add_metric([tool, "error"], tally.failed)
            for error_type, count in sorted(tally.errors.items()):
                errors.add_metric([tool, error_type], count)
            latency.add_metric([tool], tally.latency.buckets(), tally.latency.total)
        reward = HistogramMetricFamily("toolwise_reward", "Reward of each recorded call.")
        reward.add_metric([], m.reward.buckets(), m.reward.total)
        yield from (calls, errors, latency, reward)
        for name, (doc, value) in m.scraped.items():
            yield GaugeMetricFamily(f"toolwise_{name}", doc, value=value)


class Metrics:
    def __init__(self) -> None:
        self.tools: dict[str, _ToolTally] = {}
        self.reward = _Histogram(REWARD_BUCKETS)
        self.gauges: Gauges = _no_gauges
        self.scraped: GaugeValues = {}  # the gauges read for the scrape under way (`render`)
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(_Exporter(self))

    def watch(self, read: Gauges) -> None:
        """Gauges read from the running services at every scrape."""
        self.gauges = read

    def observe_call(self, execution: Execution) -> None:
        tally = self.tools.get(execution.tool)
        if tally is None:
            tally = self.tools[execution.tool] = _ToolTally()
        if execution.success:
            tally.succeeded += 1
        else:
            tally.failed += 1
            tally.errors[execution.error_type or "unknown"] += 1
        tally.latency.observe(execution.latency_ms / 1000)
        if execution.reward is not None:
            self.reward.observe(execution.reward)

    async def render(self) -> bytes:
        """The metrics in Prometheus' text format. The gauges are read first, awaited (the learned state's part
        on the learning thread, so the event loop is not blocked meanwhile); the registry's collection, which
        cannot await, then takes them as read."""
        self.scraped = await self.gauges()
        return generate_latest(self.registry)


async def _no_gauges() -> GaugeValues:
    return {}
