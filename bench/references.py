"""The simple references of bench/multistep.py, each learning online from the same stream of calls
as toolwise (the past only), written independently of toolwise's own code where they compete with it.

Next tool (after the session's previous tools): the most frequent tool; the seed's rule (the tools
seen at least twice after the longest known prefix, by count, no back-off: toolwise before issue 23);
a trigram with interpolated Witten-Bell back-off to the bigram, the unigram and uniform.
Tool for a step's text: the text prior alone (toolwise's zero-shot prior, `Learner.prior`); the
text prior × an add-k bigram (the prior as a softmax at temperature `TEMPERATURE`, picked on UltraTool,
a set no table here scores); a per-tool ridge on choices (each tool's ridge regression of "was it
the one called" on the step text's embedding: the called tool's target 1, the prior's other top
candidates 0).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

TEMPERATURE = 0.04  # the prior's softmax temperature in "text prior × bigram"
ADD_K = 0.1  # the bigram's add-k smoothing


class MostFrequent:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def rank(self) -> list[str]:
        return [tool for tool, _ in self.counts.most_common()]

    def learn(self, tool: str) -> None:
        self.counts[tool] += 1


class SeedRule:
    """The seed's next-tool rule: successors of the longest prefix (up to two tools) seen ≥ 2 times."""

    def __init__(self, n: int = 3, min_count: int = 2) -> None:
        self.n, self.min_count = n, min_count
        self.after: defaultdict[tuple[str, ...], Counter[str]] = defaultdict(Counter)

    def rank(self, history: Sequence[str]) -> list[str]:
        for length in range(min(self.n - 1, len(history)), 0, -1):
            found = [(t, c) for t, c in self.after[tuple(history[-length:])].most_common() if c >= self.min_count]
            if found:
                return [t for t, _ in found]
        return []

    def learn(self, history: Sequence[str], tool: str) -> None:
        for length in range(1, min(self.n - 1, len(history)) + 1):
            self.after[tuple(history[-length:])][tool] += 1


class WittenBell:
    """Interpolated Witten-Bell: P(t | h) = (c(h, t) + T(h)·P(t | shorter h)) / (c(h) + T(h)), down to
    the unigram and a uniform floor over `tools`."""

    def __init__(self, tools: Sequence[str], n: int = 3) -> None:
        self.tools, self.n = list(tools), n
        self.after: defaultdict[tuple[str, ...], Counter[str]] = defaultdict(Counter)

    def distribution(self, history: Sequence[str]) -> dict[str, float]:
        p = {t: 1.0 / len(self.tools) for t in self.tools}
        for length in range(0, min(self.n - 1, len(history)) + 1):
            counts = self.after[tuple(history[len(history) - length :])]
            total, types = sum(counts.values()), len(counts)
            if not total:
                continue
            p = {t: (counts.get(t, 0) + types * q) / (total + types) for t, q in p.items()}
        return p

    def rank(self, history: Sequence[str]) -> list[str]:
        p = self.distribution(history)
        return sorted(p, key=lambda t: -p[t])

    def learn(self, history: Sequence[str], tool: str) -> None:
        for length in range(0, min(self.n - 1, len(history)) + 1):
            self.after[tuple(history[len(history) - length :])][tool] += 1


class PriorTimesBigram:
    def __init__(self, tools: Sequence[str]) -> None:
        self.tools = list(tools)
        self.index = {t: i for i, t in enumerate(self.tools)}
        self.after: defaultdict[str | None, Counter[str]] = defaultdict(Counter)

    def rank(self, prior: NDArray[np.float64], previous: str | None) -> list[str]:
        text = np.exp((prior - prior.max()) / TEMPERATURE)
        counts = self.after[previous]
        total = sum(counts.values())
        bigram = np.full(len(self.tools), ADD_K)
        for tool, count in counts.items():
            bigram[self.index[tool]] += count
        bigram /= total + ADD_K * len(self.tools)
        score = text / text.sum() * bigram
        return [self.tools[i] for i in np.argsort(-score, kind="stable")]

    def learn(self, previous: str | None, tool: str) -> None:
        self.after[previous][tool] += 1


class RidgeOnChoices:
    """Per tool, ridge regression (λ = 1) of "was it the one called" on the text's embedding (its
    leading `dim` components): the called tool's target 1, the prior's other top `negatives` 0."""

    def __init__(self, tools: Sequence[str], dim: int = 64, negatives: int = 5) -> None:
        self.tools, self.dim, self.negatives = list(tools), dim, negatives
        self.a_inv = np.repeat(np.eye(dim)[None], len(self.tools), 0)
        self.b = np.zeros((len(self.tools), dim))
        self.theta = np.zeros((len(self.tools), dim))

    def _x(self, embedding: NDArray[np.float32]) -> NDArray[np.float64]:
        x = np.asarray(embedding[: self.dim], dtype=np.float64)
        norm = float(np.linalg.norm(x))
        return x / norm if norm else x

    def rank(self, embedding: NDArray[np.float32], prior: NDArray[np.float64]) -> list[str]:
        score = self.theta @ self._x(embedding) + 1e-6 * prior  # ties (nothing learned yet) by the prior
        return [self.tools[i] for i in np.argsort(-score, kind="stable")]

    def learn(self, embedding: NDArray[np.float32], prior: NDArray[np.float64], tool: int) -> None:
        x = self._x(embedding)
        others = [int(i) for i in np.argsort(-prior)[: self.negatives + 1] if i != tool][: self.negatives]
        for arm, target in [(tool, 1.0), *((o, 0.0) for o in others)]:
            ax = self.a_inv[arm] @ x
            self.a_inv[arm] -= np.outer(ax, ax) / (1.0 + x @ ax)
            self.b[arm] += target * x
            self.theta[arm] = self.a_inv[arm] @ self.b[arm]
