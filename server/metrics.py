"""Prometheus metrics, served at `/metrics` on the HTTP transport.

Per-call figures are counted when a call's deferred work runs (never on the call's path); gauges
(queue depth, exploration rate, open circuits, …) are read from the running services at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from toolwise.feedback import Execution

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
REWARD_BUCKETS = (-8.0, -5.0, -2.0, 0.0, 2.0, 5.0, 8.0, 10.0, 12.0, 14.0, 16.0)

Gauges = Callable[[], dict[str, tuple[str, float]]]  # name → (help, value)


class _Live(Collector):
    def __init__(self, read: Gauges) -> None:
        self.read = read

    def describe(self) -> list[Metric]:
        return []  # read lazily: nothing is called before the first scrape

    def collect(self) -> Iterator[Metric]:
        for name, (doc, value) in self.read().items():
            yield GaugeMetricFamily(f"toolwise_{name}", doc, value=value)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter(
            "toolwise_calls", "Proxied tool calls by outcome.", ["tool", "outcome"], registry=self.registry
        )
        self.errors = Counter(
            "toolwise_call_errors",
            "Failed proxied calls by error type.",
            ["tool", "error_type"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "toolwise_call_latency_seconds",
            "Latency of proxied calls, downstream included.",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.reward = Histogram(
            "toolwise_reward", "Reward of each recorded call.", buckets=REWARD_BUCKETS, registry=self.registry
        )

    def watch(self, read: Gauges) -> None:
        """Gauges read from the running services at every scrape."""
        self.registry.register(_Live(read))

    def observe_call(self, execution: Execution) -> None:
        self.calls.labels(execution.tool, "success" if execution.success else "error").inc()
        if not execution.success:
            self.errors.labels(execution.tool, execution.error_type or "unknown").inc()
        self.latency.labels(execution.tool).observe(execution.latency_ms / 1000)
        if execution.reward is not None:
            self.reward.observe(execution.reward)

    def render(self) -> bytes:
        return generate_latest(self.registry)
