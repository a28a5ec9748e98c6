"""BM25 over the tool documents (rl/lexical.py): a query's scores are its terms' weights summed per document
in the order of its words, whatever way they are added up."""

from __future__ import annotations

import numpy as np

from toolwise.rl.lexical import LexicalIndex
from toolwise.rl.text import tokenize

DOCUMENTS = [
    "get the current weather in a city",
    "weather forecast for the next days in a city, in celsius or fahrenheit",
    "send an email to a contact",
    "convert a currency amount into another currency",
    "list the files of a directory",
]


def term_by_term(index: LexicalIndex, query: str) -> np.ndarray:
    """Each term's postings added to a zero array in the order of the query's words (repeats counted)."""
    raw = np.zeros(len(index))
    for token in tokenize(query):
        term = index.vocabulary.get(token)
        if term is not None:
            postings = slice(index._start[term], index._start[term + 1])
            raw[index._docs[postings]] += index._weights[postings]
    top = raw.max()
    return raw / top if top > 0 else raw


def test_scores_are_the_sums_term_by_term_to_the_last_bit() -> None:
    index = LexicalIndex(DOCUMENTS)
    long = "the current weather forecast of the next days in a city in celsius or fahrenheit, a city weather"
    for query in ("weather in paris", "city city weather city", "currency weather files email", long, "nothing", ""):
        assert index.scores(query).tobytes() == term_by_term(index, query).tobytes(), query
    assert index.scores("weather forecast in celsius").argmax() == 1
    assert not index.scores("nothing known").any()


QUERIES = ["weather in Paris", "weather weather city tomorrow", "email my boss the news", "zzz qqq", "", "the a of"]


def test_scoring_many_queries_at_once_gives_each_the_numbers_it_gets_alone() -> None:
    """A run scores its distinct queries in one pass: bit for bit what each scored alone gives, repeated
    terms and unknown words included, and a query's coverage unchanged."""
    together, alone = LexicalIndex(DOCUMENTS), LexicalIndex(DOCUMENTS)
    rows = together.scores_many([*QUERIES, QUERIES[0]])
    assert rows.shape == (len(QUERIES) + 1, len(DOCUMENTS))
    for row, query in zip(rows, [*QUERIES, QUERIES[0]], strict=True):
        np.testing.assert_array_equal(row, term_by_term(alone, query))
        np.testing.assert_array_equal(alone.scores(query), row)
        assert together.coverage(query) == alone.coverage(query)
    assert rows[0].argmax() in (0, 1) and not rows[3].any()  # weather matches the weather tools; zzz nothing
    assert together.scores(QUERIES[0]).flags.writeable is False


def test_a_run_scores_its_queries_without_pushing_out_the_memoised_ones() -> None:
    """A run of logged calls (`remember=False`) gets each query's numbers, bit for bit, the memoised ones
    looked up, and leaves the memo as it was: the live decisions' queries stay in it."""
    index, alone = LexicalIndex(DOCUMENTS), LexicalIndex(DOCUMENTS)
    index.scores(QUERIES[0])
    rows = index.scores_many(QUERIES, remember=False)
    for row, query in zip(rows, QUERIES, strict=True):
        np.testing.assert_array_equal(row, alone.scores(query))
    assert len(index._memo) == 1 and QUERIES[0] in index._memo
    fresh = index.scores_many(QUERIES[1:3], remember=False)  # none memoised: the rows as scored
    np.testing.assert_array_equal(fresh, rows[1:3])
    assert len(index._memo) == 1
