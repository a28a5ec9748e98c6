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
