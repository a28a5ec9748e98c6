"""Which tools a query names outright: a search for `uber.ride` or `git_status` wants that tool.

BM25 and the embedding score a bare name as one or two words shared with many tools (among 1,000 tools
of bench/discovery.py a BFCL live tool's own name finds it first 73% of the time through the prior,
70% through plain BM25), so a query that is a tool's name, with or without its server prefix, in any
case or separator style, is matched here exactly. (A name longer than 64 characters is shortened
with a hash when namespaced: it is found by its public name only.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from toolwise.rl.embedding import name_words

PREFIX_SEPARATOR = "__"  # `server__tool`: the server's prefix before the first one
_WORD = re.compile(r"[a-z0-9]+")


def name_key(text: str) -> str:
    """A name compared by its words: `Uber.Ride`, `uber_ride`, `uber ride` and `uber {ride}` are alike
    (a namespaced name keeps only [A-Za-z0-9_-] of the downstream's)."""
    return " ".join(_WORD.findall(name_words(text).lower()))


class NameIndex:
    """Tool ids by name key, each tool under its full name and under its name without the prefix."""

    def __init__(self, names: Sequence[str]) -> None:
        self._ids: dict[str, list[int]] = {}
        for tool_id, name in enumerate(names):
            _, _, bare = name.partition(PREFIX_SEPARATOR)
            for key in dict.fromkeys([name_key(name), name_key(bare)]):
                if key:
                    self._ids.setdefault(key, []).append(tool_id)

    def named(self, query: str) -> list[int]:
        """The ids of the tools `query` names (several when servers share a tool name; usually none)."""
        return self._ids.get(name_key(query), [])
