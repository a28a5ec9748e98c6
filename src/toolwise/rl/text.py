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


_FIRST_WORD = re.compile(r"[A-Za-z]+")
# A description that opens with a label ("Branch management: list, create or delete branches") says what the
# tool does after it: a few words and a colon.
_LABEL = re.compile(r"\W*(?:[A-Za-z][\w-]*\s+){0,2}[A-Za-z][\w-]*\s*:\s")


def stem(word: str) -> str:
    """`word` lower-cased without a plural or third-person ending (`switches` → switch, `creates` → create,
    `copies` → copy): how a tool's description says what it does ("Switches branches") against the
    verb a request asks with ("switch to develop")."""
    word = word.lower()
    if len(word) < 4 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith(("ches", "shes", "sses", "xes", "zes")):
        return word[:-2]
    return word[:-1]


def action_word(description: str) -> str:
    """The word a tool's description opens with, stemmed: its verb when the description says what the
    tool does ("Unstages all staged changes" → unstage), the first after a label ("Branch management:
    list …" → list; the label is a noun); "" without a word."""
    label = _LABEL.match(description)
    found = _FIRST_WORD.search(description, label.end() if label else 0)
    return stem(found.group(0)) if found else ""
