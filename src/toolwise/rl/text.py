"""Tokenising queries and tool names the same way everywhere (context encoding and the lexical prior)."""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "get",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "or",
        "please",
        "show",
        "that",
        "the",
        "this",
        "to",
        "use",
        "what",
        "when",
        "where",
        "which",
        "with",
        "you",
        "your",
    ]
)


@lru_cache(maxsize=8192)
def tokenize(text: str) -> tuple[str, ...]:
    """Lower-case alphanumeric words without stop words; `git_status` and `git-status` give git, status.
    Cached: a decision and the update that follows it tokenise the same query twice."""
    return tuple([t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS])
