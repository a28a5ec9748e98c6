"""x(q), what the per-tool weights θ_t of the choice model (rl/policies/choice.py) and of the semantic
residual (semantic.py) read of a request: the leading `dim` components of the query embedding (or, without
one, the folded hashed features), unit length."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context


def query_features(context: Context, dim: int) -> NDArray[np.float64]:
    """x(q) of one context."""
    if context.embedding is not None:
        x = np.zeros(dim)
        head = np.asarray(context.embedding[:dim], dtype=np.float64)
        x[: len(head)] = head
    else:
        x = np.zeros(dim)
        np.add.at(x, context.indices % dim, context.values)
    norm = math.sqrt(float(x @ x))
    return x / norm if norm else x


def stacked_features(embeddings: Sequence[NDArray[np.float32]], dim: int) -> NDArray[np.float64]:
    """x(q) of each of `embeddings` (all of one length), one row each: the same numbers as `query_features`."""
    head = np.stack([e[:dim] for e in embeddings]).astype(np.float64)
    x = np.zeros((len(embeddings), dim))
    x[:, : head.shape[1]] = head
    norms = np.sqrt(np.matmul(x[:, None, :], x[:, :, None])[:, 0, 0])  # one dot a row, as `query_features`'s
    x /= np.where(norms > 0, norms, 1.0)[:, None]
    return x
