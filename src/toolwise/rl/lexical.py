"""BM25 relevance between a query and each tool's name + description: the cold-start prior."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.memo import Memo
from toolwise.rl.text import tokenize

MEMO = 1024  # queries whose scores are kept (8 bytes a tool each): a decision and its update share them
TERMS = 8192  # queries whose terms are kept (a few numbers each): a run's rows are scored afresh, its words not


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
        self._best: list[float] = (idf * (k1 + 1)).tolist()  # a term's largest weight in any document (tf → ∞)
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
        self._memo: Memo[str, tuple[NDArray[np.float64], float]] = Memo(MEMO)  # per index: a catalogue starts afresh
        self._terms: Memo[str, NDArray[np.float64]] = Memo(TERMS)  # `_query_terms`

    def __len__(self) -> int:
        return self._size

    def scores(self, query: str) -> NDArray[np.float64]:
        """Relevance of every document to `query`, divided by the best one (all zeros if none match).
        Read-only: memoised (the least recently used forgotten first), since a decision and its update
        score the same query, and agents repeat their requests."""
        return self._scored(query)[0]

    def scores_many(self, queries: Sequence[str], *, remember: bool = True) -> NDArray[np.float64]:
        """`scores` of each of `queries`, one row each: the memoised looked up, the others scored together
        (one pass over their postings, the same numbers as one at a time) and, with `remember`, memoised (a
        run of logged calls does not: its queries would push out those of the live decisions). Distinct
        queries none of which is memoised come back as scored, without a copy."""
        distinct = dict.fromkeys(queries)
        found = {q: hit[0] for q in distinct if (hit := self._memo.get(q)) is not None}
        missing = [q for q in distinct if q not in found]
        if missing:
            raw, coverage = self._score_rows(missing)
            for query, row, covered in zip(missing, raw, coverage, strict=True):
                if remember:
                    kept = row.copy()  # not a view: a memoised row must not keep the whole block alive
                    kept.setflags(write=False)
                    self._memo.put(query, (kept, covered))
                found[query] = row
            if len(missing) == len(queries):
                return raw
        if not queries:
            return np.zeros((0, self._size))
        return np.stack([found[q] for q in queries])

    def coverage(self, query: str) -> float:
        """How much of `query` the best document covers, in [0, 1]: its BM25 over the most any document
        could score (every term of the query, unknown ones too, at its largest weight). Unlike `scores`,
        comparable across queries: "nothing fits" reads it (rl/fit.py)."""
        return self._scored(query)[1]

    def _scored(self, query: str) -> tuple[NDArray[np.float64], float]:
        found = self._memo.get(query)
        if found is None:
            row, coverage = self._score_row(query)
            row.setflags(write=False)
            found = self._memo.put(query, (row, coverage))
        return found

    def _score_row(self, query: str) -> tuple[NDArray[np.float64], float]:
        """`_score_rows([query])`'s row and coverage, bit for bit (the same postings added in the same order),
        without the steps that place several queries' rows: a decision scores one query."""
        part = self._terms_of(query)
        size = self._size
        if not size or len(part) < 2:
            return np.zeros(size), 0.0
        postings, _ = self._postings(part[1:].astype(np.int64))
        row = np.bincount(self._docs[postings], self._weights[postings], size).astype(np.float64, copy=False)
        top, most = float(row.max()), float(part[0])
        if top > 0:  # a row that matched nothing is all 0: left as it is
            row /= top
        return row, top / most if most > 0 else 0.0

    def _score_rows(self, queries: Sequence[str]) -> tuple[NDArray[np.float64], list[float]]:
        """Each query's BM25 against every document, divided by its best one, and its coverage. Each
        document's score sums its postings in the query's token order, whatever the number of queries:
        one query's numbers are bit for bit those it gets among many."""
        found = [self._terms_of(query) for query in queries]
        most = [float(part[0]) for part in found]
        per_query = [len(part) - 1 for part in found]  # each query's terms
        terms = np.concatenate([part[1:] for part in found]).astype(np.int64) if found else np.zeros(0, np.int64)
        size = self._size
        if not size or not len(terms):
            return np.zeros((len(queries), size)), [0.0] * len(queries)
        postings, lengths = self._postings(terms)  # lengths: the postings of each (query, term)
        owners = np.repeat(np.arange(len(queries), dtype=np.int64), per_query)
        cells = np.repeat(owners * size, lengths) + self._docs[postings]
        sums = np.bincount(cells, self._weights[postings], len(queries) * size)  # in input order: token order
        raw = sums.astype(np.float64, copy=False).reshape(len(queries), size)
        top = raw.max(axis=1)
        matched = top > 0
        raw /= np.where(matched, top, 1.0)[:, None]  # a row that matched nothing is all 0: left as it is
        coverage = [t / m if m > 0 else 0.0 for t, m in zip(top.tolist(), most, strict=True)]
        return raw, coverage

    def _terms_of(self, query: str) -> NDArray[np.float64]:
        """`_query_terms(query)`, memoised."""
        part = self._terms.get(query)
        return self._terms.put(query, self._query_terms(query)) if part is None else part

    def _postings(self, terms: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Every posting of each of `terms` in order (term t's are [start[t], start[t+1]): CSR), and how many
        each term has."""
        begin = self._start[terms]
        lengths = self._start[terms + 1] - begin
        postings = np.repeat(begin - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
        return postings, lengths

    def _query_terms(self, query: str) -> NDArray[np.float64]:
        """The most any document could score for `query` (every token at its largest weight, summed in
        token order), then the ids of its tokens that some document holds, in token order (exact as floats):
        one array, which the garbage collector does not track (a tuple and a list a query it did, and the
        bench's thousand new entries a learner set off its collections)."""
        find, best, unknown = self.vocabulary.get, self._best, self._unknown
        ids: list[int] = []
        total = 0.0
        for token in tokenize(query):
            term = find(token)
            if term is None:
                total += unknown
            else:
                total += best[term]
                ids.append(term)
        return np.array([total, *ids], dtype=np.float64)
