"""Argument suggestions: the values successful calls used for similar requests, never a redacted one."""

from __future__ import annotations

import re

import numpy as np

from toolwise.feedback.arguments import DEFAULT_REDACT_PATTERN, redact
from toolwise.rl.arguments import ArgumentMemory


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_the_value_of_the_most_similar_requests_wins() -> None:
    memory = ArgumentMemory(neighbours=3)
    paris, tokyo = unit(1, 0, 0), unit(0, 1, 0)
    for _ in range(2):
        memory.add("weather", paris, {"city": "Paris", "units": "celsius"})
    memory.add("weather", tokyo, {"city": "Tokyo", "units": "celsius"})
    suggested = {s.name: s.value for s in memory.suggest("weather", unit(0.1, 1, 0))}
    assert suggested == {"city": "Tokyo", "units": "celsius"}
    assert {s.name: s.value for s in memory.suggest("weather", unit(1, 0.1, 0))}["city"] == "Paris"
    assert memory.suggest("flights", paris) == []


def test_secrets_are_never_suggested() -> None:
    memory = ArgumentMemory()
    pattern = re.compile(DEFAULT_REDACT_PATTERN, re.IGNORECASE)
    arguments = {"api_key": "sk-live-0123456789abcdef", "url": "https://bob:hunter22@example.com/x", "city": "Oslo"}
    memory.add("fetch", unit(1, 0), redact(arguments, pattern))
    suggested = {s.name: s.value for s in memory.suggest("fetch", unit(1, 0))}
    assert suggested == {"city": "Oslo"}


def test_memory_stays_bounded_per_tool() -> None:
    memory = ArgumentMemory(per_tool=4)
    for i in range(10):
        memory.add("t", unit(1, i), {"n": i})
    assert len(memory) == 4
    assert {s.value for s in memory.suggest("t", unit(1, 9))} <= {6, 7, 8, 9}
