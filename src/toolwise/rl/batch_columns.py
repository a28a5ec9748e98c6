"""A run's feature columns, each computed once for the whole run (rl/batch.py): the distinct queries
embedded in one call, their text columns (cosine and BM25) in one product, each distinct history's
sequence column, and which candidates each call's session already called."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.batch_view import Learner
from toolwise.rl.blas import one_blas_thread
from toolwise.rl.context import Context, query_only
from toolwise.rl.ids import in_order
from toolwise.rl.policies.base import FEATURES
from toolwise.rl.steps import StepColumns


def already_called(
    calls: list[int],
    first: NDArray[np.bool_],
    histories: Sequence[Sequence[str]],
    position: NDArray[np.int64],
    seen: Callable[[Sequence[str]], list[int]],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(row, column) of each candidate that `calls` (row r: calls[r]) already called in their session:
    `position` maps a tool id to its column (−1: not a candidate), `seen` names to ids."""
    called: list[int] = []
    owners: list[int] = []
    for r, i in enumerate(calls):
        if not first[i]:
            ids = [t for t in seen(histories[i]) if t >= 0]
            called.extend(ids)
            owners.extend([r] * len(ids))
    at = position.take(np.array(called, dtype=np.int64))
    return np.array(owners, dtype=np.int64)[at >= 0], at[at >= 0]


def sequence_columns(
    learner: Learner, steps: StepColumns, arms: NDArray[np.int64]
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """`Features.sequence_column` of each distinct history of the run (zeros with the sequences off) as
    float32, as the feature rows hold it (cast once a run, not once a minibatch), and each step's row in it."""
    histories = list(dict.fromkeys(tuple(history) for history in steps.history))
    history_of = {history: i for i, history in enumerate(histories)}
    if learner.config.sequences_enabled:
        sequence = learner.features.sequence_columns(histories, arms).astype(np.float32)
    else:
        sequence = np.zeros((len(histories), len(arms)), np.float32)
    return sequence, np.array([history_of[tuple(history)] for history in steps.history], dtype=np.int64)


def text_columns(
    learner: Learner, queries: list[str], contexts: list[Context], arms: NDArray[np.int64]
) -> NDArray[np.float32]:
    """`Features.text_columns` of each distinct query (a last zero row: no query), the cosines of all of
    them one matrix product (float32, as one query's; its sums' order differs: the last bits may, ≤ 1e-6):
    the first two of each query's feature rows (float32, as the choice model reads them), the others 0."""
    out = np.zeros((len(queries) + 1, len(arms), len(FEATURES)), np.float32)
    semantic, lexical = learner.index.semantic, learner.index.lexical
    if not queries:
        return out
    known = np.flatnonzero(arms < len(lexical))
    if not len(known):  # no candidate has a document (no tool listed yet): no text to match
        return out
    everywhere = len(known) == len(arms)  # the catalogue describes every candidate: whole columns, no scatter
    columns = slice(None) if everywhere else known
    tools = arms.take(known)
    whole = everywhere and in_order(tools)  # every tool, in id order: whole columns, no gather
    bm25 = lexical.scores_many(queries, remember=False)
    if not (whole and len(tools) == bm25.shape[1]):
        bm25 = bm25.take(tools, 1)
    out[: len(queries), columns, 1 if semantic is not None else 0] = bm25
    if semantic is not None:
        vectors = np.stack([context.embedding for context in contexts[: len(queries)] if context.embedding is not None])
        documents = semantic.vectors[: len(tools)] if whole else semantic.vectors.take(tools, 0)
        with one_blas_thread():
            cosine = vectors @ documents.T
        np.clip(cosine, 0.0, 1.0, out=cosine)
        out[: len(queries), columns, 0] = cosine
    cautious = np.flatnonzero(learner.index.caution_of(arms))
    if len(cautious):
        for i, query in enumerate(queries):
            out[i, cautious, :2] *= learner.features.kept(query, arms.take(cautious))[:, None]
    return out


def query_contexts(learner: Learner, queries: list[str]) -> list[Context]:
    """The context of each distinct query, and last of none, as a policy reads it: the embedding alone
    (one call embeds them all), or without an embedder the encoded text."""
    semantic = learner.index.semantic
    if semantic is None:
        return [learner.encode(query, None, 0) for query in [*queries, None]]
    vectors = semantic.queries(queries) if queries else np.zeros((0, len(semantic.no_query)), np.float32)
    return [*(query_only(vector) for vector in vectors), query_only(semantic.no_query)]


def query_part(
    learner: Learner, queries: list[str], rows: NDArray[np.int64], arms: NDArray[np.int64]
) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
    """The distinct queries' embeddings (one call; a last zero row for "no query") and each step's
    semantic + lexical prior for its tool, as `Features.prior` computes it without the follow part (the
    caution on tools that write included)."""
    semantic = learner.index.semantic
    assert semantic is not None
    index, weight = learner.index.lexical, learner.config.lexical_weight
    vectors = semantic.queries(queries) if queries else np.zeros((0, len(semantic.no_query)), np.float32)
    embeddings = np.concatenate([vectors, np.zeros((1, vectors.shape[1]), np.float32)])  # + no query: x = 0
    known = len(semantic)
    inside = arms < known
    base = np.zeros(len(arms))
    tool_vectors = semantic.vectors
    with_query = inside & (rows < len(queries))
    if with_query.any():
        lexical = index.scores_many(queries, remember=False)
        r, a = rows[with_query], arms[with_query]
        cosine = np.clip(np.einsum("ij,ij->i", vectors[r], tool_vectors[a]), 0.0, 1.0).astype(np.float64)
        base[with_query] = (cosine + weight * lexical[r, a]) / (1 + weight)
    without = inside & (rows == len(queries))
    if without.any():
        base[without] = index.scores("").take(arms[without])
    for i in np.flatnonzero(inside & (learner.index.caution_of(np.where(inside, arms, 0)) > 0)).tolist():
        query = queries[rows[i]] if rows[i] < len(queries) else None
        base[i] *= float(learner.features.kept(query, arms[i : i + 1])[0])
    return embeddings, base
