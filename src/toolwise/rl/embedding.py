"""The semantic prior: cosine similarity between a query's embedding and each tool document's.

The embedding model itself is loaded by the server (files on disk are I/O); rl receives it as an
`Embedder`, a pure function from texts to unit-length vectors, and keeps what it computed: tool
vectors once per catalogue change (reused by document text), query vectors once per query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[_.\-/:]+")
QUERY_MEMO = 1024  # query vectors (and their scores) memoised: 1 KB + 8 bytes a tool each


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
        self, embedder: Embedder, documents: Sequence[str], known: dict[str, NDArray[np.float32]] | None = None
    ) -> None:
        self.embedder = embedder
        known = known or {}
        missing = [d for d in dict.fromkeys(documents) if d not in known]
        if missing:
            known = {**known, **dict(zip(missing, embedder.embed(missing), strict=True))}
        self.by_document = {d: known[d] for d in documents}
        self.vectors = (
            np.stack([known[d] for d in documents]).astype(np.float32) if documents else np.zeros((0, 1), np.float32)
        )
        self._queries: dict[str, list[Any]] = {}  # query → [vector, scores (None until asked for)]
        self.no_query = np.zeros(self.vectors.shape[1], dtype=np.float32)
        self.no_query.setflags(write=False)

    def __len__(self) -> int:
        return len(self.vectors)

    def _entry(self, query: str) -> list[Any]:
        """[vector, scores or None until asked for] of a query, memoised."""
        found = self._queries.get(query)
        if found is None:
            found = self._remember(query, self.embedder.embed([query])[0])
        return found

    def _remember(self, query: str, vector: NDArray[np.float32]) -> list[Any]:
        if len(self._queries) >= QUERY_MEMO:  # bounded: emptied when full (a decision and its update share one)
            self._queries.clear()
        vector.setflags(write=False)
        found = self._queries[query] = [vector, None]
        return found

    def queries(self, queries: Sequence[str]) -> NDArray[np.float32]:
        """The queries' unit vectors, one row each: those memoised looked up, the others embedded in
        one call and memoised (a replay's batches repeat a log's queries)."""
        missing = [q for q in dict.fromkeys(queries) if q not in self._queries]
        fresh = dict(zip(missing, self.embedder.embed(missing), strict=True)) if missing else {}
        out = np.stack([fresh[q] if q in fresh else self._queries[q][0] for q in queries])
        if len(self._queries) + len(fresh) > QUERY_MEMO:  # emptied now rather than midway: the run's queries stay
            self._queries = {q: self._queries[q] for q in dict.fromkeys(queries) if q in self._queries}
        for query, vector in fresh.items():
            self._remember(query, vector)
        return out

    def query(self, query: str) -> NDArray[np.float32]:
        """The query's unit vector (read-only, memoised)."""
        vector: NDArray[np.float32] = self._entry(query)[0]
        return vector

    def scores(self, query: str) -> NDArray[np.float64]:
        """Cosine similarity of the query with every tool document, clipped to [0, 1] (read-only)."""
        entry = self._entry(query)
        if entry[1] is None:
            scores = np.zeros(0)
            if len(self.vectors):
                cosine = self.vectors @ entry[0]
                scores = np.clip(cosine, 0.0, 1.0, out=cosine).astype(np.float64)  # clipped in place
            scores.setflags(write=False)
            entry[1] = scores
        found: NDArray[np.float64] = entry[1]
        return found
