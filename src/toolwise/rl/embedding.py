"""The semantic prior: cosine similarity between a query's embedding and each tool document's.

The embedding model itself is loaded by the server (files on disk are I/O); rl receives it as an
`Embedder`, a pure function from texts to unit-length vectors, and keeps what it computed: tool
vectors once per catalogue change (reused by document text), query vectors once per query (kept across
catalogue changes).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.memo import Memo

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[_.\-/:]+")
QUERY_MEMO = 4096  # query vectors memoised (1 KB each at 256-d): agents repeat their requests
SCORES_MEMO = 1024  # their cosines with every tool memoised (8 bytes a tool each)


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit-length row per text (a text with no known word gives a zero row)."""
        ...


def name_words(name: str) -> str:
    """A tool name as words: `git__log_file`, `getWeather`, `Movies_3.Find` → git log file, get weather, …"""
    return " ".join(_SEPARATORS.sub(" ", _CAMEL.sub(r"\1 \2", name)).split())


class SemanticIndex:
    """Unit vectors of tool documents (rows in tool-id order) and a memo of query vectors and scores."""

    def __init__(
        self,
        embedder: Embedder,
        documents: Sequence[str],
        known: dict[str, NDArray[np.float32]] | None = None,
        previous: SemanticIndex | None = None,
    ) -> None:
        """`previous`: the index this one replaces (a catalogue change); its query vectors are kept when
        its embedder is this one's, since a query's vector does not depend on the catalogue (its scores do)."""
        self.embedder = embedder
        known = known or {}
        missing = [d for d in dict.fromkeys(documents) if d not in known]
        if missing:
            known = {**known, **dict(zip(missing, embedder.embed(missing), strict=True))}
        self.by_document = {d: known[d] for d in documents}
        self.vectors = (
            np.stack([known[d] for d in documents]).astype(np.float32) if documents else np.zeros((0, 1), np.float32)
        )
        self._vectors: Memo[str, NDArray[np.float32]] = (
            previous._vectors if previous is not None and previous.embedder is embedder else Memo(QUERY_MEMO)
        )
        self._scores: Memo[str, NDArray[np.float64]] = Memo(SCORES_MEMO)  # a decision and its update share them
        self.no_query = np.zeros(self.vectors.shape[1], dtype=np.float32)
        self.no_query.setflags(write=False)

    def __len__(self) -> int:
        return len(self.vectors)

    def _remember(self, query: str, vector: NDArray[np.float32]) -> NDArray[np.float32]:
        vector.setflags(write=False)
        return self._vectors.put(query, vector)

    def queries(self, queries: Sequence[str]) -> NDArray[np.float32]:
        """The queries' unit vectors, one row each: those memoised looked up, the others embedded in
        one call and memoised (a replay's batches and the learning thread's runs repeat queries)."""
        distinct = dict.fromkeys(queries)
        found = {q: v for q in distinct if (v := self._vectors.get(q)) is not None}
        missing = [q for q in distinct if q not in found]
        if missing:
            for query, vector in zip(missing, self.embedder.embed(missing), strict=True):
                found[query] = self._remember(query, vector)
        return np.stack([found[q] for q in queries])

    def query(self, query: str) -> NDArray[np.float32]:
        """The query's unit vector (read-only, memoised)."""
        vector = self._vectors.get(query)
        if vector is None:
            vector = self._remember(query, self.embedder.embed([query])[0])
        return vector

    def scores(self, query: str) -> NDArray[np.float64]:
        """Cosine similarity of the query with every tool document, clipped to [0, 1] (read-only)."""
        scores = self._scores.get(query)
        if scores is None:
            vector = self.query(query)
            scores = np.zeros(0)
            if len(self.vectors):
                cosine = self.vectors @ vector
                scores = np.clip(cosine, 0.0, 1.0, out=cosine).astype(np.float64)  # clipped in place
            scores.setflags(write=False)
            self._scores.put(query, scores)
        return scores
