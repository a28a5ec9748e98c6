from __future__ import annotations

import numpy as np
import pytest

from toolwise.rl.lexical import LexicalIndex
from toolwise.rl.memo import Memo
from toolwise.rl.text import tokenize

DOCUMENTS = [
    "weather forecast for a city: temperature and rain",
    "send an email message to a contact",
    "search the web for pages and news",
    "weather alerts and storm warnings for a region",
    "convert a currency amount at today's rate",
]
QUERIES = ["weather in Paris", "rain rain rain tomorrow", "email my boss the news", "zzz qqq", "", "the a of"]


def test_the_least_recently_used_entry_is_forgotten_first() -> None:
    memo: Memo[str, int] = Memo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # now the most recent
    memo.put("c", 3)
    assert "b" not in memo and memo.get("a") == 1 and memo.get("c") == 3
    assert len(memo) == 2
    with pytest.raises(ValueError, match="at least one entry, got capacity 0"):
        Memo(0)


def reference_bm25(index: LexicalIndex, query: str) -> np.ndarray:
    """One query's scores as the index scored them one term at a time, summed in token order."""
    raw = np.zeros(len(index))
    for token in tokenize(query):
        term = index.vocabulary.get(token)
        if term is not None:
            postings = slice(index._start[term], index._start[term + 1])
            raw[index._docs[postings]] += index._weights[postings]
    top = raw.max() if len(raw) else 0.0
    return raw / top if top > 0 else raw


def test_scoring_many_queries_at_once_gives_each_the_numbers_it_gets_alone() -> None:
    """A run scores its distinct queries in one pass: bit for bit what each scored alone gives, repeated
    terms and unknown words included, and a query's coverage unchanged."""
    together, alone = LexicalIndex(DOCUMENTS), LexicalIndex(DOCUMENTS)
    rows = together.scores_many([*QUERIES, QUERIES[0]])
    assert rows.shape == (len(QUERIES) + 1, len(DOCUMENTS))
    for row, query in zip(rows, [*QUERIES, QUERIES[0]], strict=True):
        np.testing.assert_array_equal(row, reference_bm25(alone, query))
        np.testing.assert_array_equal(alone.scores(query), row)
        assert together.coverage(query) == alone.coverage(query)
    assert rows[0].argmax() in (0, 3) and not rows[3].any()  # weather matches the weather tools; zzz nothing
    assert together.scores(QUERIES[0]).flags.writeable is False
