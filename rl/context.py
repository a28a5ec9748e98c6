"""Context of a decision: (query, previous tool, session length) → a hash and a feature vector.

The hash keys the tabular policies; the feature vector (feature hashing, L2-normalised) feeds the
generalising ones. Both are stable across processes: hashing uses BLAKE2b/SHA-256, never `hash()`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

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


@dataclass(frozen=True, slots=True)
class Context:
    """`indices`/`values` are the non-zero entries of the d-dimensional feature vector."""

    hash: str
    keywords: tuple[str, ...]
    previous_tool: str | None
    length_bucket: int
    indices: NDArray[np.int64] = field(repr=False)
    values: NDArray[np.float64] = field(repr=False)

    def dense(self, dim: int) -> NDArray[np.float64]:
        vector = np.zeros(dim)
        np.add.at(vector, self.indices, self.values)
        return vector


@lru_cache(maxsize=200_000)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    """Stable bucket and sign of one feature (the hashing trick with a sign bit against collisions)."""
    digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
    return digest % dim, 1.0 if (digest >> 63) & 1 else -1.0


@dataclass(frozen=True, slots=True)
class ContextEncoder:
    domain_keywords: tuple[str, ...] = tuple(DEFAULT_DOMAIN_KEYWORDS)
    first_words: int = 3
    dim: int = 256
    length_bucket_size: int = 5

    def __post_init__(self) -> None:
        if self.dim < 8 or self.first_words < 0 or self.length_bucket_size < 1:
            raise ValueError(
                f"need dim ≥ 8, first_words ≥ 0, length_bucket_size ≥ 1; "
                f"got {self.dim}, {self.first_words}, {self.length_bucket_size}"
            )

    def encode(self, query: str | None, previous_tool: str | None, session_length: int) -> Context:
        """The context of a decision (cached: a decision and its update encode the same inputs)."""
        return _encode(self, query, previous_tool, session_length)

    def _encode(self, query: str | None, previous_tool: str | None, session_length: int) -> Context:
        if session_length < 0:
            raise ValueError(f"session_length must be ≥ 0, got {session_length}")
        tokens = tokenize(query or "")
        keywords = self.keywords(tokens)
        bucket = session_length // self.length_bucket_size
        key = f"kw={','.join(keywords)};prev={previous_tool or ''};len={bucket}"
        indices, values = self._features(tokens, previous_tool, bucket, session_length)
        return Context(hashlib.sha256(key.encode()).hexdigest(), keywords, previous_tool, bucket, indices, values)

    def keywords(self, tokens: list[str]) -> tuple[str, ...]:
        """Domain keywords present (sorted) followed by the first words: the tabular context's key."""
        domain = set(self.domain_keywords)
        found = sorted({t for t in tokens if t in domain})
        return (*found, *tokens[: self.first_words])

    def _features(
        self, tokens: Iterable[str], previous_tool: str | None, bucket: int, length: int
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        # The exact position early in a session matters (first call vs follow-up); later, the bucket.
        names = [f"w={t}" for t in tokens]
        names += [f"prev={previous_tool or '<start>'}", f"len={bucket}", f"pos={min(length, 9)}", "bias"]
        slots = [_slot(name, self.dim) for name in names]
        vector: dict[int, float] = {}
        for index, sign in slots:
            vector[index] = vector.get(index, 0.0) + sign
        indices = np.fromiter(vector.keys(), dtype=np.int64, count=len(vector))
        values = np.fromiter(vector.values(), dtype=np.float64, count=len(vector))
        norm = float(np.linalg.norm(values))
        return indices, values / norm if norm else values


@lru_cache(maxsize=4096)
def _encode(encoder: ContextEncoder, query: str | None, previous_tool: str | None, length: int) -> Context:
    context = encoder._encode(query, previous_tool, length)
    context.indices.flags.writeable = False  # shared through the cache: nobody may change it
    context.values.flags.writeable = False
    return context
