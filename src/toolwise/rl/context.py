"""Context of a decision: (query, previous tool, session length) → a hash and a feature vector.

The hash keys the tabular policies; the feature vector (feature hashing, L2-normalised) feeds the
generalising ones. Both are stable across processes: hashing uses BLAKE2b/SHA-256, never `hash()`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.text import tokenize

DEFAULT_DOMAIN_KEYWORDS = [
    "git",
    "commit",
    "diff",
    "status",
    "log",
    "branch",
    "merge",
    "file",
    "files",
    "read",
    "write",
    "search",
    "find",
    "list",
    "time",
    "date",
    "timezone",
    "convert",
    "clock",
    "fetch",
    "url",
    "web",
    "http",
    "api",
    "database",
    "query",
    "sql",
    "test",
    "build",
    "deploy",
    "error",
    "debug",
]


Hashed = tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]  # a context's indices, values, squares
LAST_EXACT_POSITION = 9  # session positions up to this one are features of their own; later ones share it


@dataclass(slots=True)
class Context:
    """`indices`/`values` are the non-zero entries of the d-dimensional feature vector, `squares` the values²
    (for confidence widths): hashed when first read, since the policies over the query's embedding (the
    default) never read them."""

    hash: str
    keywords: tuple[str, ...]
    previous_tool: str | None
    length_bucket: int
    hashed: Hashed | Callable[[], Hashed] = field(repr=False, compare=False)  # (indices, values, squares)
    embedding: NDArray[np.float32] | None = field(default=None, repr=False, compare=False)  # the query's, when known

    @property
    def indices(self) -> NDArray[np.int64]:
        return self._hashed()[0]

    @property
    def values(self) -> NDArray[np.float64]:
        return self._hashed()[1]

    @property
    def squares(self) -> NDArray[np.float64]:
        return self._hashed()[2]

    def _hashed(self) -> Hashed:
        hashed = self.hashed
        if callable(hashed):
            hashed = self.hashed = hashed()
        return hashed


def embedded(context: Context, embed: Callable[[], NDArray[np.float32]]) -> Context:
    """`context` with its query's embedding, computed once: the encoder's memo keeps the context, so
    the next decision on the same query finds it embedded."""
    if context.embedding is None:
        context.embedding = embed()
    return context


_NO_INDICES = np.zeros(0, np.int64)
_NO_VALUES = np.zeros(0, np.float64)
for _array in (_NO_INDICES, _NO_VALUES):
    _array.setflags(write=False)


def query_only(embedding: NDArray[np.float32]) -> Context:
    """A context that carries only its query's embedding: what a run's policies read of each distinct
    query (rl/batch.py), without encoding the text of every one."""
    return Context("", (), None, 0, (_NO_INDICES, _NO_VALUES, _NO_VALUES), embedding)


def _slot(feature: str, dim: int) -> tuple[int, float]:
    """Stable bucket and sign of one feature (the hashing trick with a sign bit against collisions)."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return digest % dim, 1.0 if (digest >> 63) & 1 else -1.0


@dataclass(slots=True)
class ContextEncoder:
    """Encodes contexts, memoising per encoder: contexts (a decision and its update encode the same
    inputs), each query word's feature slot, and each (previous tool, bucket, position) slot triple.
    The memos are plain bounded dicts, emptied when full: cheaper per miss than an LRU, and a miss is
    what every new query is."""

    domain_keywords: tuple[str, ...] = tuple(DEFAULT_DOMAIN_KEYWORDS)
    first_words: int = 3
    dim: int = 256
    length_bucket_size: int = 5
    memo_size: int = 4096
    _domain: frozenset[str] = field(init=False, repr=False, compare=False)
    _contexts: dict[tuple[str | None, str | None, int, int], Context] = field(init=False, repr=False, compare=False)
    _words: dict[str, tuple[int, float]] = field(init=False, repr=False, compare=False)
    _fixed: dict[tuple[str | None, int, int], tuple[tuple[int, ...], tuple[float, ...]]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if self.dim < 8 or self.first_words < 0 or self.length_bucket_size < 1 or self.memo_size < 1:
            raise ValueError(
                f"need dim ≥ 8, first_words ≥ 0, length_bucket_size ≥ 1, memo_size ≥ 1; "
                f"got {self.dim}, {self.first_words}, {self.length_bucket_size}, {self.memo_size}"
            )
        for name, value in (
            ("_domain", frozenset(self.domain_keywords)),
            ("_contexts", {}),
            ("_words", {}),
            ("_fixed", {}),
        ):
            object.__setattr__(self, name, value)

    def encode(self, query: str | None, previous_tool: str | None, position: int) -> Context:
        """The context of a decision (memoised; the arrays of a memoised context are read-only). Keyed by
        what the context depends on: lengths in one bucket past the exact positions share one entry."""
        key = (
            query,
            previous_tool,
            position // self.length_bucket_size,
            min(position, LAST_EXACT_POSITION),
        )
        context = self._contexts.get(key)
        if context is None:
            if len(self._contexts) >= self.memo_size:
                self._contexts.clear()
            context = self._contexts[key] = self._encode(query, previous_tool, position)
        return context

    def _encode(self, query: str | None, previous_tool: str | None, position: int) -> Context:
        if position < 0:
            raise ValueError(f"position must be ≥ 0, got {position}")
        tokens = tokenize(query or "")
        keywords = self.keywords(tokens)
        bucket = position // self.length_bucket_size
        key = f"kw={','.join(keywords)};prev={previous_tool or ''};len={bucket}"

        def hashed() -> Hashed:
            indices, values = self._features(tokens, previous_tool, bucket, position)
            squares = values * values
            for array in (indices, values, squares):
                array.setflags(write=False)
            return indices, values, squares

        digest = hashlib.sha256(key.encode()).hexdigest()
        return Context(digest, keywords, previous_tool, bucket, hashed)

    def keywords(self, tokens: Sequence[str]) -> tuple[str, ...]:
        """Domain keywords present (sorted) followed by the first words: the tabular context's key."""
        domain = self._domain
        found = sorted({t for t in tokens if t in domain})
        return (*found, *tokens[: self.first_words])

    def _features(
        self, tokens: Sequence[str], previous_tool: str | None, bucket: int, length: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        # The exact position early in a session matters (first call vs follow-up); later, the bucket.
        words, fixed_slots = self._words, self._fixed
        if len(words) > 50 * self.memo_size:  # bounded: queries bring new words for as long as we run
            words.clear()
        index_of: list[int] = []
        sign_of: list[float] = []
        for token in tokens:
            slot = words.get(token)
            if slot is None:
                slot = words[token] = _slot(f"w={token}", self.dim)
            index_of.append(slot[0])
            sign_of.append(slot[1])
        position = min(length, LAST_EXACT_POSITION)
        fixed = fixed_slots.get((previous_tool, bucket, position))
        if fixed is None:
            if len(fixed_slots) >= self.memo_size:
                fixed_slots.clear()
            names = (f"prev={previous_tool or '<start>'}", f"len={bucket}", f"pos={position}", "bias")
            slots, signs = zip(*(_slot(name, self.dim) for name in names), strict=True)
            fixed = fixed_slots[(previous_tool, bucket, position)] = (slots, signs)
        index_of.extend(fixed[0])
        sign_of.extend(fixed[1])
        if len(set(index_of)) == len(index_of):  # the usual case: every feature has a slot of its own
            scale = 1.0 / math.sqrt(len(index_of))
            return np.array(index_of, dtype=np.int64), np.array([sign * scale for sign in sign_of])
        vector: dict[int, float] = {}
        for index, sign in zip(index_of, sign_of, strict=True):  # features sharing a slot add up
            vector[index] = vector.get(index, 0.0) + sign
        indices = np.array(list(vector), dtype=np.int64)
        values = np.array(list(vector.values()), dtype=np.float64)
        norm = math.sqrt(float(values @ values))
        if norm:
            values /= norm
        return indices, values
