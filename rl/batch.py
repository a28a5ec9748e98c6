"""Learning a run of logged executions at once: the catch-up after start-up, a replay of the log.

One step at a time the learner spends most of a replay on per-step overhead (embedding and scoring
the query, the policy's Sherman–Morrison step, n-gram look-ups): ~2,000 steps/s. Here the order-
dependent parts stay a plain loop, cheap per step (each tool's running latency and so the reward's
speed bonus, the n-gram counts and the prior's "follows the previous tool" evidence, the reward sum),
while the batch's distinct queries are embedded and scored once and the policy learns the whole run
from grouped sufficient statistics (`update_batch`). A policy without `update_batch`, or a learner
without an embedder, learns step by step as `Learner.observe` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from toolwise.rl.learner import Learner, Step


def learn_batch(learner: Learner, steps: Sequence[Step], rng: np.random.Generator) -> int:
    """Learn `steps` in order, as `learner.observe` would one by one; returns how many were learned."""
    update_batch = getattr(learner.policy, "update_batch", None)
    if update_batch is None or learner.semantic is None:
        for step in steps:
            learner.observe(step, rng)
        return len(steps)
    if not steps:
        return 0
    arms = np.fromiter((learner.tools.intern(step.tool) for step in steps), dtype=np.int64, count=len(steps))
    learner._grow(len(learner.tools))
    rewards, follow = _ordered_part(learner, steps, arms.tolist())
    queries = list(dict.fromkeys(step.query for step in steps if step.query))
    index = {query: i for i, query in enumerate(queries)}
    rows = np.fromiter(
        (index[step.query] if step.query else len(queries) for step in steps), dtype=np.int64, count=len(steps)
    )
    embeddings, base = _query_part(learner, queries, rows, arms)
    priors = np.maximum(base, follow)
    low, high = learner.config.reward.bounds
    scaled = np.clip((rewards - low) / (high - low), 0.0, 1.0)
    update_batch(embeddings, rows, arms, [step.previous_tool for step in steps], scaled, priors)
    learner.updates += len(steps)
    return len(steps)


def _ordered_part(
    learner: Learner, steps: Sequence[Step], arms: list[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The steps' rewards and the prior's follow evidence (−1 where there is none), walking the
    batch in order as the step-by-step path does: reward from the tool's running latency before the
    step, follow evidence from the n-grams before it, then latency and n-grams updated."""
    from toolwise.rl.learner import worked

    rewards = _rewards(learner, steps, arms)
    known = len(learner.index)  # tools the prior scores (the catalogue at the last set_tools)
    previous = [step.previous_tool if arm < known else None for step, arm in zip(steps, arms, strict=True)]
    histories = [step.history for step in steps] if learner.config.sequences_enabled else None
    success = np.fromiter((worked(step.success, step.rating) for step in steps), dtype=bool, count=len(steps))
    follow = learner.sequences.observe_batch(previous, [step.tool for step in steps], histories, rewards, success)
    return rewards, follow


def _rewards(learner: Learner, steps: Sequence[Step], arms: list[int]) -> NDArray[np.float64]:
    """`compute_reward` of each step with its tool's running mean latency before it (the running
    means move on: the same recurrence as one step at a time), the arithmetic over arrays in the same
    order, so each reward is the same number. The batch is checked first: a bad step learns nothing."""
    n, weights = len(steps), learner.config.reward
    latency = np.fromiter((step.latency_s for step in steps), dtype=np.float64, count=n)
    bad = ~np.isfinite(latency) | (latency < 0)
    if bad.any():
        raise ValueError(f"latency must be a finite number of seconds ≥ 0, got {latency[bad][0]!r}")
    ratings = [step.rating for step in steps]
    for rating in ratings:
        if rating is not None and (isinstance(rating, bool) or rating not in (1, 2, 3, 4, 5)):
            raise ValueError(f"rating must be an integer from 1 to 5, got {rating!r}")
    before = _running_latency(learner, arms, latency.tolist())
    success = np.fromiter((step.success for step in steps), dtype=bool, count=n)
    rewards = np.where(success, weights.success, weights.failure)
    rated = [i for i, rating in enumerate(ratings) if rating is not None]
    if rated:
        rewards[rated] += (np.array([ratings[i] for i in rated], dtype=np.float64) - 3) * weights.rating_per_point
    rewards -= weights.latency_per_second * np.minimum(latency, weights.max_latency_s)
    rewards[latency < weights.fast_fraction * before] += weights.fast_bonus  # NaN (no mean yet): never fast
    learner.reward_sum = float(np.cumsum(np.concatenate([[learner.reward_sum], rewards]))[-1])
    return rewards


def _running_latency(learner: Learner, arms: list[int], latency: list[float]) -> NDArray[np.float64]:
    """Each step's tool's mean latency before it (NaN before its first call), updating the learner's
    running means and counts past the batch."""
    means, counts = learner.latency_mean, learner.latency_count
    mean: dict[int, float] = {}
    count: dict[int, int] = {}
    before = np.full(len(arms), np.nan)
    for i, (arm, seconds) in enumerate(zip(arms, latency, strict=True)):
        n = count.get(arm)
        if n is None:
            n, m = int(counts[arm]), float(means[arm])
        else:
            m = mean[arm]
        if n:
            before[i] = m
        count[arm] = n + 1
        mean[arm] = m + (seconds - m) / (n + 1)
    touched = np.fromiter(count, dtype=np.int64, count=len(count))
    counts[touched] = list(count.values())
    means[touched] = list(mean.values())
    return before


def _query_part(
    learner: Learner, queries: list[str], rows: NDArray[np.int64], arms: NDArray[np.int64]
) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
    """The distinct queries' embeddings (one call; a last zero row for "no query") and each step's
    semantic + lexical prior for its tool, as `Learner.prior` computes it without the follow part."""
    semantic = learner.semantic
    assert semantic is not None
    index, weight = learner.index, learner.config.lexical_weight
    vectors = semantic.queries(queries) if queries else np.zeros((0, len(semantic.no_query)), np.float32)
    embeddings = np.concatenate([vectors, np.zeros((1, vectors.shape[1]), np.float32)])  # + no query: x = 0
    known = len(semantic)
    inside = arms < known
    base = np.zeros(len(arms))
    tool_vectors = semantic.vectors
    with_query = inside & (rows < len(queries))
    if with_query.any():
        lexical = np.stack([index.scores(q) for q in queries])
        r, a = rows[with_query], arms[with_query]
        cosine = np.clip(np.einsum("ij,ij->i", vectors[r], tool_vectors[a]), 0.0, 1.0).astype(np.float64)
        base[with_query] = (cosine + weight * lexical[r, a]) / (1 + weight)
    without = inside & (rows == len(queries))
    if without.any():
        base[without] = index.scores("").take(arms[without])
    return embeddings, base
