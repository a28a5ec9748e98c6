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
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.learner import Learner, Step, worked
from toolwise.rl.policies.base import BatchPolicy
from toolwise.rl.policies.choice import FEATURES, ChoiceModel
from toolwise.rl.reward import check_latency, check_rating


@dataclass(frozen=True, slots=True)
class StepColumns:
    """A run of steps as columns (row i of each is step i), what a batch reads of each `Step`: a
    replay builds these from the log's columns without an object a step."""

    tool: Sequence[str]
    success: Sequence[bool]
    latency_ms: Sequence[float]
    query: Sequence[str | None]
    previous_tool: Sequence[str | None]
    history: Sequence[Sequence[str]]
    position: Sequence[int]
    rating: Sequence[int | None] | None = None  # None: no step is rated

    @classmethod
    def of(cls, steps: Sequence[Step]) -> StepColumns:
        return cls(
            [s.tool for s in steps],
            [s.success for s in steps],
            [s.latency_ms for s in steps],
            [s.query for s in steps],
            [s.previous_tool for s in steps],
            [s.history for s in steps],
            [s.position for s in steps],
            [s.rating for s in steps],
        )

    def step(self, i: int) -> Step:
        """Row `i` as a `Step`: the one place columns become one."""
        return Step(
            self.tool[i],
            self.success[i],
            self.latency_ms[i],
            query=self.query[i],
            previous_tool=self.previous_tool[i],
            position=self.position[i],
            history=self.history[i],
            rating=None if self.rating is None else self.rating[i],
        )

    def steps(self) -> list[Step]:
        return [self.step(i) for i in range(len(self))]

    def __len__(self) -> int:
        return len(self.tool)


def learn_batch(learner: Learner, steps: Sequence[Step], rng: np.random.Generator) -> int:
    """Learn `steps` in order, as `learner.observe` would one by one; returns how many were learned."""
    if isinstance(learner.policy, ChoiceModel):
        return _learn_choices(learner, learner.policy, StepColumns.of(steps), rng)
    policy = learner.policy
    if not isinstance(policy, BatchPolicy) or learner.index.semantic is None:
        for step in steps:
            learner.observe(step, rng)
        return len(steps)
    return _learn_columns(learner, policy, StepColumns.of(steps))


def learn_columns(learner: Learner, steps: StepColumns, rng: np.random.Generator) -> int:
    """`learn_batch` of steps given as columns (a replay: no object a step unless the policy learns
    step by step)."""
    if isinstance(learner.policy, ChoiceModel):
        return _learn_choices(learner, learner.policy, steps, rng)
    policy = learner.policy
    if not isinstance(policy, BatchPolicy) or learner.index.semantic is None:
        return learn_batch(learner, steps.steps(), rng)
    return _learn_columns(learner, policy, steps)


def _learn_columns(learner: Learner, policy: BatchPolicy, steps: StepColumns) -> int:
    n = len(steps)
    if not n:
        return 0
    intern = learner.index.tools.intern
    arm_list = [intern(tool) for tool in steps.tool]
    arms = np.array(arm_list, dtype=np.int64)
    rewards, follow = _ordered_part(learner, steps, arm_list)
    queries = list(dict.fromkeys(q for q in steps.query if q))
    index = {query: i for i, query in enumerate(queries)}
    rows = np.array([index[q] if q else len(queries) for q in steps.query], dtype=np.int64)
    embeddings, base = _query_part(learner, queries, rows, arms)
    priors = np.maximum(base, follow)
    low, high = learner.config.reward.bounds
    scaled = np.clip((rewards - low) / (high - low), 0.0, 1.0)
    policy.update_batch(embeddings, rows, arms, steps.previous_tool, scaled, priors)
    ratings = steps.rating if steps.rating is not None else [None] * n
    _watch(learner, steps, scaled, np.fromiter(map(worked, steps.success, ratings), dtype=bool, count=n))
    learner.count(rewards)
    return n


CHOICE_BATCH = 32  # calls a minibatch step of the choice model takes together in a replay


def _learn_choices(learner: Learner, policy: ChoiceModel, steps: StepColumns, rng: np.random.Generator) -> int:
    """The choice model learns a run of calls in order, one SGD step (and its replays) a call as
    `observe` would, but with each distinct query embedded and scored once and each distinct history's
    sequence column computed once, from the n-grams as they stood before the run (the run's own
    n-grams count from the next run on: minibatch semantics, a few hundred calls late at most)."""
    n = len(steps)
    if not n:
        return 0
    arm_list = [learner.index.tools.intern(tool) for tool in steps.tool]
    arms = learner.index.active
    missing = sorted(set(arm_list) - set(arms.tolist()))
    if missing:
        arms = np.concatenate([arms, np.array(missing, dtype=np.int64)])
    position = {arm: i for i, arm in enumerate(arms.tolist())}
    sequence: dict[tuple[str, ...], NDArray[np.float64]] = {}
    if learner.config.sequences_enabled:
        for history in steps.history:
            key = tuple(history)
            if key not in sequence:
                sequence[key] = learner.features.sequence_column(key, arms)
    rewards, _ = _ordered_part(learner, steps, arm_list)
    queries = list(dict.fromkeys(q for q in steps.query if q))
    x = _query_features(learner, policy, queries)  # embeds them in one call (memoised for the scores)
    text = {q: learner.index.text_columns(q, arms) for q in queries}
    ratings = steps.rating if steps.rating is not None else [None] * n
    ok = np.fromiter(map(worked, steps.success, ratings), dtype=bool, count=n)
    scaled = np.clip((rewards - learner.config.reward.bounds[0]) / np.ptp(learner.config.reward.bounds), 0.0, 1.0)
    weight = 0.5 + 0.5 * np.where(ok, scaled, 1 - scaled)
    called = np.array([position[arm] for arm in arm_list], dtype=np.int64)
    _watch(learner, steps, scaled, ok)
    empty = np.zeros(len(arms))
    no_text = np.zeros((len(arms), 2))
    for start in range(0, n, CHOICE_BATCH):
        part = range(start, min(start + CHOICE_BATCH, n))
        rows = np.zeros((len(part), len(arms), len(FEATURES)))
        for r, i in enumerate(part):
            query, history = steps.query[i], tuple(steps.history[i])
            rows[r, :, :2] = text[query] if query else no_text
            if learner.config.sequences_enabled:
                rows[r, :, 2 if history else 3] = sequence.get(history, empty)
            if history:
                rows[r, :, 4] = learner.index.repeat_column(history, arms)
        features = np.stack([x[steps.query[i] or ""] for i in part])
        window = slice(part.start, part.stop)
        policy.learn_calls(features, arms, rows, called[window], ok[window], weight[window], rng)
    learner.count(rewards)
    return n


def _watch(learner: Learner, steps: StepColumns, scaled: NDArray[np.float64], worked: NDArray[np.bool_]) -> None:
    """The adaptive ε and the drift guard see every replayed call, in order, as live ones."""
    for tool, value, ok in zip(steps.tool, scaled.tolist(), worked.tolist(), strict=True):
        learner.watch(tool, value, ok)


def _query_features(learner: Learner, policy: ChoiceModel, queries: list[str]) -> dict[str, NDArray[np.float64]]:
    """x(q) of each distinct query ("" for none), as the choice model's `features` computes it."""
    dim = policy.config.dim
    features: dict[str, NDArray[np.float64]] = {}
    if learner.index.semantic is not None:
        vectors = learner.index.semantic.queries(queries) if queries else np.zeros((0, dim), np.float32)
        for query, vector in zip(queries, vectors, strict=True):
            features[query] = _unit(vector, dim)
        features[""] = _unit(learner.index.semantic.no_query, dim)
    else:
        for query in queries:
            features[query] = policy.features(learner.encode(query, None, 0))
        features[""] = policy.features(learner.encode(None, None, 0))
    return features


def _unit(vector: NDArray[np.float32], dim: int) -> NDArray[np.float64]:
    x = np.zeros(dim)
    head = np.asarray(vector[:dim], dtype=np.float64)
    x[: len(head)] = head
    norm = float(np.sqrt(x @ x))
    return x / norm if norm else x


def _ordered_part(
    learner: Learner, steps: StepColumns, arms: list[int]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The steps' rewards and the prior's follow evidence (−1 where there is none), as the step-by-
    step path has them: reward from the tool's running latency before the step, follow evidence from
    the n-grams before it, then latency and n-grams updated."""
    rewards, success = _rewards(learner, steps, arms)
    known = len(learner.index.lexical)  # tools the prior scores (the catalogue at the last set_tools)
    previous = [p if arm < known else None for p, arm in zip(steps.previous_tool, arms, strict=True)]
    histories = steps.history if learner.config.sequences_enabled else None
    if steps.rating is not None:
        success = np.fromiter(map(worked, success.tolist(), steps.rating), dtype=bool, count=len(success))
    follow = learner.sequences.observe_batch(previous, steps.tool, histories, rewards, success)
    return rewards, follow


def _rewards(learner: Learner, steps: StepColumns, arms: list[int]) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """`compute_reward` of each step with its tool's running mean latency before it (the running
    means move on: the same recurrence as one step at a time), the arithmetic over arrays in the same
    order, so each reward is the same number; and which steps succeeded. The batch is checked first:
    a bad step learns nothing."""
    weights = learner.config.reward
    latency = np.array(steps.latency_ms, dtype=np.float64) / 1000  # seconds, as the weights
    bad = ~np.isfinite(latency) | (latency < 0)
    if bad.any():
        check_latency(float(latency[bad][0]))  # raises, naming the first bad one
    ratings = steps.rating or ()
    for rating in ratings:
        check_rating(rating)
    before = learner.latency.add_run(arms, latency.tolist())
    success = np.array(steps.success, dtype=bool)
    rewards = np.where(success, weights.success, weights.failure)
    rated = [i for i, rating in enumerate(ratings) if rating is not None]
    if rated:
        points = np.array([ratings[i] for i in rated], dtype=np.float64)
        rewards[rated] += (points - 3) * weights.rating_per_point
    rewards -= weights.latency_per_second * np.minimum(latency, weights.max_latency_s)
    rewards[latency < weights.fast_fraction * before] += weights.fast_bonus  # NaN (no mean yet): never fast
    return rewards, success


def _query_part(
    learner: Learner, queries: list[str], rows: NDArray[np.int64], arms: NDArray[np.int64]
) -> tuple[NDArray[np.float32], NDArray[np.float64]]:
    """The distinct queries' embeddings (one call; a last zero row for "no query") and each step's
    semantic + lexical prior for its tool, as `Learner.prior` computes it without the follow part."""
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
        lexical = np.stack([index.scores(q) for q in queries])
        r, a = rows[with_query], arms[with_query]
        cosine = np.clip(np.einsum("ij,ij->i", vectors[r], tool_vectors[a]), 0.0, 1.0).astype(np.float64)
        base[with_query] = (cosine + weight * lexical[r, a]) / (1 + weight)
    without = inside & (rows == len(queries))
    if without.any():
        base[without] = index.scores("").take(arms[without])
    return embeddings, base
