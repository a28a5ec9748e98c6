"""Argument values that worked: for a tool and a request, the values its successful calls used for
requests like it.

Each tool keeps its most recent successful calls (a bounded ring: `per_tool`), each as the request's
embedding (the same text features as the prior) and its arguments' scalar values. A suggestion
looks at the `neighbours` most similar past requests (cosine), and for each argument takes the value
with the most similarity-weighted votes among them, with its share of the votes as confidence.
Values a caller may not see never enter: the caller redacts secrets before `add` (a value that was
redacted is skipped here too), and the memory belongs to one namespace's learner.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

REDACTED_MARK = "***"  # feedback/arguments.py's mask: a value holding it is never suggested
MAX_VALUE_CHARS = 200  # longer values (documents, pasted data) are not suggestions


@dataclass(frozen=True, slots=True)
class Suggestion:
    name: str
    value: Any
    confidence: float  # the value's share of the similarity-weighted votes of the neighbours that set it
    seen: int  # neighbours that set this argument


def suggestible(value: Any) -> bool:
    """A scalar (or a short list of scalars) that holds no redacted part."""
    if isinstance(value, list):
        return len(value) <= 10 and all(suggestible(v) for v in value)
    if isinstance(value, str):
        return len(value) <= MAX_VALUE_CHARS and REDACTED_MARK not in value
    return isinstance(value, bool | int | float) or value is None


class ArgumentMemory:
    def __init__(self, per_tool: int = 256, neighbours: int = 8) -> None:
        if per_tool < 1 or neighbours < 1:
            raise ValueError(f"need per_tool ≥ 1 and neighbours ≥ 1, got {per_tool}, {neighbours}")
        self.per_tool, self.neighbours = per_tool, neighbours
        self._calls: dict[str, deque[tuple[NDArray[np.float32], dict[str, str]]]] = {}

    def __len__(self) -> int:
        return sum(len(calls) for calls in self._calls.values())

    def add(self, tool: str, embedding: NDArray[np.float32], arguments: Mapping[str, Any]) -> None:
        """A successful call of `tool` for the request embedded as `embedding`, with its (redacted)
        arguments; values kept as canonical JSON (so lists and numbers compare exactly)."""
        kept = {k: json.dumps(v, sort_keys=True) for k, v in arguments.items() if suggestible(v)}
        if not kept:
            return
        calls = self._calls.get(tool)
        if calls is None:
            calls = self._calls[tool] = deque(maxlen=self.per_tool)
        calls.append((np.asarray(embedding, np.float32), kept))

    def suggest(self, tool: str, embedding: NDArray[np.float32]) -> list[Suggestion]:
        """The likeliest value of each argument `tool`'s similar past calls set, best supported first."""
        calls = self._calls.get(tool)
        if not calls:
            return []
        vectors = np.stack([v for v, _ in calls])
        similarity = np.clip(vectors @ np.asarray(embedding, np.float32), 0.0, None) + 1e-3
        nearest = np.argsort(-similarity, kind="stable")[: self.neighbours]
        votes: dict[str, dict[str, float]] = {}
        for i in nearest.tolist():
            for name, value in calls[i][1].items():
                votes.setdefault(name, {})
                votes[name][value] = votes[name].get(value, 0.0) + float(similarity[i])
        out = []
        for name, tally in votes.items():
            value, weight = max(tally.items(), key=lambda item: item[1])
            seen = sum(1 for i in nearest.tolist() if name in calls[i][1])
            out.append(Suggestion(name, json.loads(value), weight / sum(tally.values()), seen))
        return sorted(out, key=lambda s: (-s.seen, -s.confidence, s.name))
