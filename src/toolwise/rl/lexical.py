"""BM25 relevance between a query and each tool's name + description: the cold-start prior."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.text import tokenize


class LexicalIndex:
    """Okapi BM25 over tool documents as an inverted index (per term: the documents holding it and its
    BM25 weight in each), so memory grows with the postings, not tools × vocabulary; `scores()` adds
    a few postings per query, scaled to [0, 1]."""

    def __init__(self, documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        counts = [Counter(tokenize(d)) for d in documents]
        self.vocabulary: dict[str, int] = {}
        terms: list[int] = []
        docs: list[int] = []
        tfs: list[int] = []
        for row, doc in enumerate(counts):
            for token, tf in doc.items():
                terms.append(self.vocabulary.setdefault(token, len(self.vocabulary)))
                docs.append(row)
                tfs.append(tf)
        n = len(documents)
        term = np.array(terms, dtype=np.int64)
        doc_ids = np.array(docs, dtype=np.int32)
        tf_values = np.array(tfs, dtype=np.float64)
        df = np.bincount(term, minlength=len(self.vocabulary))
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        self._best_of: list[float] = (idf * (k1 + 1)).tolist()  # a term's largest weight (tf → ∞, any length)
        self._unknown = float(np.log1p((n + 0.5) / 0.5) * (k1 + 1))  # the same of a term no document holds
        lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
        avg = float(lengths.mean()) if n else 1.0
        norm = k1 * (1 - b + b * lengths[doc_ids] / max(avg, 1e-9))
        weights = idf[term] * tf_values * (k1 + 1) / (tf_values + norm)
        order = np.argsort(term, kind="stable")  # postings grouped by term (CSR): term t is [start[t], start[t+1])
        self._docs = doc_ids[order]
        self._weights = weights[order]
        self._start = np.concatenate(([0], np.cumsum(df))).astype(np.int64)
        self._size = n
        self._memo: dict[str, tuple[NDArray[np.float64], float]] = {}  # per index: a catalogue starts afresh

    def __len__(self) -> int:
        return self._size

    def scores(self, query: str) -> NDArray[np.float64]:
        """Relevance of every document to `query`, divided by the best one (all zeros if none match).
        Read-only: memoised (a bounded dict, emptied when full), since a decision and its update score
        the same query."""
        return self._scored(query)[0]

    def coverage(self, query: str) -> float:
        """How much of `query` the best document covers, in [0, 1]: its BM25 over the most any document
        could score (every term of the query, unknown ones too, at its largest weight). Unlike `scores`,
        comparable across queries: "nothing fits" reads it (rl/fit.py)."""
        return self._scored(query)[1]

    def _scored(self, query: str) -> tuple[NDArray[np.float64], float]:
        found = self._memo.get(query)
        if found is None:
            if len(self._memo) >= 1024:
                self._memo.clear()
            found = self._memo[query] = self._scores(query)
        return found

    def _scores(self, query: str) -> tuple[NDArray[np.float64], float]:
        vocabulary, best = self.vocabulary, self._best_of
        terms: list[int] = []
        most = 0.0
        for token in tokenize(query):
            term = vocabulary.get(token)
            if term is None:
                most += self._unknown
            else:
                most += best[term]
                terms.append(term)
        raw = self._add_postings(np.array(terms, dtype=np.int64)) if terms else np.zeros(self._size)
        top = float(raw[raw.argmax()]) if self._size else 0.0
        if top > 0:
            raw /= top
        raw.setflags(write=False)
        return raw, (top / most if most > 0 else 0.0)

    def _add_postings(self, terms: NDArray[np.int64]) -> NDArray[np.float64]:
        """Each document's sum of the weights of `terms` (in their order, repeats counted), as one gather of
        their postings and one `bincount`: it adds them to each document in that order from 0, the same
        sums to the last bit as a loop adding term by term (a term's documents are distinct)."""
        begin = self._start.take(terms)
        count = self._start.take(terms + 1) - begin
        at = np.repeat(begin - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
        raw = np.bincount(self._docs.take(at), self._weights.take(at), self._size)
        return raw.astype(np.float64, copy=False)  # float64 already (weighted): for the type checker
