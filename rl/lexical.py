"""BM25 relevance between a query and each tool's name + description: the cold-start prior."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.text import tokenize


class LexicalIndex:
    """Okapi BM25 over tool documents; `scores()` is one sparse dot product per query, scaled to [0, 1]."""

    def __init__(self, documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        docs = [tokenize(d) for d in documents]
        self.vocabulary: dict[str, int] = {}
        for doc in docs:
            for token in doc:
                self.vocabulary.setdefault(token, len(self.vocabulary))
        tf = np.zeros((len(docs), max(1, len(self.vocabulary))))
        for row, doc in enumerate(docs):
            for token in doc:
                tf[row, self.vocabulary[token]] += 1
        n = len(docs)
        df = (tf > 0).sum(axis=0)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        lengths = tf.sum(axis=1, keepdims=True)
        avg = float(lengths.mean()) if n else 1.0
        # Precompute the BM25 weight of every (term, document), term-major: a query sums a few rows.
        weights = idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths / max(avg, 1e-9)))
        self._weights = np.ascontiguousarray(weights.T)
        self._size = n
        self._memo: dict[str, NDArray[np.float64]] = {}  # per index: a new catalogue starts afresh

    def __len__(self) -> int:
        return self._size

    def scores(self, query: str) -> NDArray[np.float64]:
        """Relevance of every document to `query`, divided by the best one (all zeros if none match).
        Read-only: memoised (a bounded dict, emptied when full), since a decision and its update score
        the same query."""
        found = self._memo.get(query)
        if found is None:
            if len(self._memo) >= 1024:
                self._memo.clear()
            found = self._memo[query] = self._scores(query)
        return found

    def _scores(self, query: str) -> NDArray[np.float64]:
        vocabulary = self.vocabulary
        rows = [row for t in tokenize(query) if (row := vocabulary.get(t)) is not None]
        raw = np.add.reduce(self._weights.take(rows, 0), axis=0) if rows else np.zeros(self._size)
        top = float(raw[raw.argmax()]) if self._size else 0.0
        if top > 0:
            raw /= top
        raw.setflags(write=False)
        return raw
