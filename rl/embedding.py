"""The semantic prior: cosine similarity between a query's embedding and each tool document's.

The embedding model itself is loaded by the server (files on disk are I/O); rl receives it as an
`Embedder`, a pure function from texts to unit-length vectors, and keeps what it computed: tool
vectors once per catalogue change (reused by document text), query vectors once per query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[_.\-/:]+")


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
        self._queries: dict[str, tuple[NDArray[np.float32], NDArray[np.float64]]] = {}
        self.no_query = np.zeros(self.vectors.shape[1], dtype=np.float32)
        self.no_query.setflags(write=False)

    def __len__(self) -> int:
        return len(self.vectors)

    def _entry(self, query: str) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
        found = self._queries.get(query)
        if found is None:
            if len(self._queries) >= 1024:  # bounded: emptied when full (a decision and its update share one)
                self._queries.clear()
            vector = self.embedder.embed([query])[0]
            scores = np.clip(self.vectors @ vector, 0.0, 1.0).astype(np.float64) if len(self.vectors) else np.zeros(0)
            vector.setflags(write=False)
            scores.setflags(write=False)
            found = self._queries[query] = (vector, scores)
        return found

    def query(self, query: str) -> NDArray[np.float32]:
        """The query's unit vector (read-only, memoised)."""
        return self._entry(query)[0]

    def scores(self, query: str) -> NDArray[np.float64]:
        """Cosine similarity of the query with every tool document, clipped to [0, 1] (read-only)."""
        return self._entry(query)[1]
