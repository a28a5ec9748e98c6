"""Settling the semantic residual's batched rows (rl/policies/semantic.py, `learn_many`): a log replayed
at start-up is kept as it comes and settled together, per tool, from sufficient statistics (A += XᵀX,
b += Xᵀy and the bucket sums), to the exact joint ridge posterior of (θ, φ) given the state before the
batch. Plain functions over the policy's arrays."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

# a run's rows waiting to be settled: its queries' features, each row's query, arm, bucket (−1: none)
# and residual target
Pending = tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]


def by_tool(
    pending: list[Pending],
) -> tuple[NDArray[np.float64], list[tuple[int, NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]]]:
    """The pending runs as one: every query's features, and each tool's rows into them, buckets and
    residual targets, tools in the order of their ids (each tool's rows in the order they came)."""
    offsets = np.cumsum([0] + [len(f) for f, *_ in pending[:-1]])
    features = np.concatenate([f for f, *_ in pending])
    rows = np.concatenate([r + o for (_, r, *_), o in zip(pending, offsets, strict=True)])
    arms, buckets, y = (np.concatenate([p[i] for p in pending]) for i in (2, 3, 4))
    order = np.argsort(arms, kind="stable")
    tools, starts = np.unique(arms[order], return_index=True)
    return features, [
        (tool, rows[part], buckets[part], y[part])
        for tool, part in zip(tools.tolist(), np.split(order, starts[1:]), strict=True)
    ]


def joint_posterior(
    before: NDArray[np.float64],
    theta: NDArray[np.float64],
    features: NDArray[np.float64],
    rows: NDArray[np.int64],
    y: NDArray[np.float64],
    buckets: NDArray[np.int64],
    phi: NDArray[np.float64],
    phi_inv: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Joint ridge posterior of one tool's (θ, φ) from a prior with precision blockdiag(`before`,
    1/`phi_inv`) and means (`theta`, `phi`; φ over the sorted distinct buckets ≥ 0 of the rows) and the
    rows: residual targets `y` over x = features[rows], in bucket `buckets[i]` or none (−1). The bucket
    block is diagonal, so it is eliminated (Schur complement) and one d×d system solved. Returns θ, the
    query block's precision after, and φ with its variances."""
    distinct, inverse = np.unique(rows, return_inverse=True)
    x = features[distinct]
    weight = np.bincount(inverse, minlength=len(distinct)).astype(np.float64)
    after = before + (x.T * weight) @ x
    rhs = before @ theta + x.T @ np.bincount(inverse, weights=y, minlength=len(distinct))
    has = buckets >= 0
    if not has.any():
        alone = np.asarray(np.linalg.solve(after, rhs), dtype=np.float64)
        return alone, after, phi, phi_inv
    used, slot = np.unique(buckets[has], return_inverse=True)
    counts = np.zeros((len(used), len(distinct)))
    np.add.at(counts, (slot, inverse[has]), 1.0)
    cross = counts @ x  # (buckets used, dim): Σ x over each bucket's rows
    prior_precision = 1.0 / phi_inv
    precision = prior_precision + counts.sum(axis=1)
    phi_rhs = prior_precision * phi + np.bincount(slot, weights=y[has], minlength=len(used))
    solved: NDArray[np.float64] = np.linalg.solve(
        after - (cross.T / precision) @ cross, rhs - cross.T @ (phi_rhs / precision)
    )
    return solved, after, (phi_rhs - cross @ solved) / precision, 1.0 / precision
