"""Learning a run of logged executions at once: the catch-up after start-up, a replay of the log.

One step at a time the learner spends most of a replay on per-step overhead (embedding and scoring
the query, the policy's step, n-gram look-ups). Here the order-dependent parts stay a plain loop,
cheap per step (each tool's running latency and so the reward's speed bonus, the n-gram counts and
the prior's "follows the previous tool" evidence, the reward sum), while the run's distinct queries
are embedded once and the policy learns the whole run at once (`Policy.learn_many`). A policy that
does not declare `learn_many` learns step by step, as `Learner.learn` does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.blas import one_blas_thread
from toolwise.rl.context import Context, query_only
from toolwise.rl.features import Features
from toolwise.rl.hindsight import readings
from toolwise.rl.policies.base import FEATURES, Lessons, Policy
from toolwise.rl.reward import Latencies, RewardWeights, check_latency, check_rating
from toolwise.rl.sequences import SequenceModel
from toolwise.rl.steps import Step, StepColumns, worked
from toolwise.rl.toolindex import ToolIndex


class Learned(Protocol):
    @property
    def reward(self) -> float: ...


class RunConfig(Protocol):
    @property
    def reward(self) -> RewardWeights: ...
    @property
    def sequences_enabled(self) -> bool: ...
    @property
    def lexical_weight(self) -> float: ...


class Learner(Protocol):
    """What a run reads and calls of the learner (rl/learner.py's, which calls in here from its
    `learn_many`): named here rather than imported, so that the two modules do not import each other."""

    @property
    def config(self) -> RunConfig: ...
    @property
    def policy(self) -> Policy: ...
    @property
    def index(self) -> ToolIndex: ...
    @property
    def features(self) -> Features: ...
    @property
    def sequences(self) -> SequenceModel: ...
    @property
    def latency(self) -> Latencies: ...
    def learn(self, step: Step, rng: np.random.Generator) -> Learned: ...
    def encode(self, query: str | None, previous_tool: str | None, position: int) -> Context: ...
    def watch(self, tool: str, normalised: float, ok: bool) -> object: ...
    def count(self, rewards: NDArray[np.float64]) -> None: ...
    def hold(self, step: Step, reward: float) -> None: ...
    def age(self, rng: np.random.Generator) -> None: ...
    def read_waiting(self, session: str, rng: np.random.Generator, *, next_tool: str | None = None) -> None: ...


def learn_run(learner: Learner, steps: StepColumns, rng: np.random.Generator) -> NDArray[np.float64]:
    """Learn `steps` in order, as `learner.learn` would one by one; returns each step's reward.
    A policy that learns from the query's embedding alone (not a choice among candidates, whose rows
    carry the text) needs the embedding: with a lexical prior it learns step by step."""
    capabilities = learner.policy.capabilities
    if not capabilities.learn_many or not (capabilities.candidates or learner.index.semantic is not None):
        return np.array([learner.learn(steps.step(i), rng).reward for i in range(len(steps))], dtype=np.float64)
    if not len(steps):
        return np.zeros(0)
    if capabilities.candidates:
        return _learn_choices(learner, steps, rng)
    return _learn_columns(learner, steps, rng)


def _learn_columns(learner: Learner, steps: StepColumns, rng: np.random.Generator) -> NDArray[np.float64]:
    n = len(steps)
    intern = learner.index.tools.intern
    arm_list = [intern(tool) for tool in steps.tool]
    arms = np.array(arm_list, dtype=np.int64)
    rewards, follow = _ordered_part(learner, steps, arm_list)
    queries = list(dict.fromkeys(q for q in steps.query if q))
    index = {query: i for i, query in enumerate(queries)}
    rows = np.array([index[q] if q else len(queries) for q in steps.query], dtype=np.int64)
    embeddings, base = _query_part(learner, queries, rows, arms)
    scaled = _scaled(learner, rewards)
    ratings = steps.rating if steps.rating is not None else [None] * n
    ok = np.fromiter(map(worked, steps.success, ratings), dtype=bool, count=n)
    lessons = Lessons(
        [query_only(vector) for vector in embeddings],
        rows,
        arms,
        scaled,
        ok,
        np.ones(n),
        np.maximum(base, follow),
        steps.previous_tool,
    )
    learner.policy.learn_many(lessons, rng)
    _watch(learner, steps, scaled, ok)
    learner.count(rewards)
    return rewards


def _scaled(learner: Learner, rewards: NDArray[np.float64]) -> NDArray[np.float64]:
    """The rewards normalised to [0, 1], as `normalise` does one."""
    low, high = learner.config.reward.bounds
    scaled: NDArray[np.float64] = np.clip((rewards - low) / (high - low), 0.0, 1.0)
    return scaled


def _learn_choices(learner: Learner, steps: StepColumns, rng: np.random.Generator) -> NDArray[np.float64]:
    """A policy that learns calls as choices among candidates learns a run in order (minibatches),
    with each distinct query embedded once and each distinct history's sequence column computed once,
    from the n-grams as they stood before the run (the run's own n-grams count from the next run on:
    minibatch semantics, a few hundred calls late at most)."""
    n = len(steps)
    arm_list = [learner.index.tools.intern(tool) for tool in steps.tool]
    arms = learner.index.active
    missing = sorted(set(arm_list) - set(arms.tolist()))
    if missing:
        arms = np.concatenate([arms, np.array(missing, dtype=np.int64)])
    sequence, history_at = _sequence_columns(learner, steps, arms)
    rewards, _ = _ordered_part(learner, steps, arm_list)
    queries = list(dict.fromkeys(q for q in steps.query if q))
    contexts = _query_contexts(learner, queries)  # embeds them in one call (memoised for the text columns)
    text = _text_columns(learner, queries, contexts, arms)  # with the caution on tools that write
    ratings = steps.rating if steps.rating is not None else [None] * n
    ok = np.fromiter(map(worked, steps.success, ratings), dtype=bool, count=n)
    scaled = _scaled(learner, rewards)
    _watch(learner, steps, scaled, ok)
    sessions, faults = steps.session or [None] * n, steps.fault or [None] * n
    chosen, fit, pending = readings(steps.tool, steps.success, ratings, sessions, faults)  # rl/hindsight.py
    if learner.policy.capabilities.hindsight:
        _read_waiting(learner, steps, rng)
    else:
        pending[:] = False
    kept = np.flatnonzero(~pending)  # a failure last of its session in the run waits for its next call, as live
    index = {query: i for i, query in enumerate(queries)}
    context_of = np.array([index[q] if q else len(queries) for q in steps.query], dtype=np.int64)
    first = np.array([not history for history in steps.history], dtype=bool)
    position = np.full(len(learner.index.tools) + 1, -1, dtype=np.int64)  # tool id → its column in `arms`
    position[arms] = np.arange(len(arms))
    seen = learner.index.tools.ids

    def rows(part: range) -> NDArray[np.float32]:
        """The feature rows of the kept calls in `part`, gathered from the run's text and sequence columns
        (float32, as the choice model's minibatches read them and its memory keeps them)."""
        calls = kept[part.start : part.stop]
        block = text.take(context_of.take(calls), 0)  # the text columns, the rest 0 until set
        if learner.config.sequences_enabled:
            columns, starts = sequence.take(history_at.take(calls), 0), first.take(calls)
            block[~starts, :, 2] = columns[~starts]
            block[starts, :, 3] = columns[starts]
        owners, at = _already_called(calls.tolist(), first, steps.history, position, seen)
        block[owners, at, 4] = 1.0  # 1 for each tool the session already called
        return block

    lessons = Lessons(
        contexts,
        context_of[kept],
        np.array(arm_list, dtype=np.int64)[kept],
        scaled[kept],
        chosen[kept],
        (0.5 + 0.5 * np.where(chosen, scaled, 1 - scaled))[kept],
        np.zeros(len(kept)),
        [steps.previous_tool[i] for i in kept.tolist()],
        arms,
        rows,
        fit[kept],
    )
    learner.policy.learn_many(lessons, rng)
    learner.count(rewards)
    for i in np.flatnonzero(pending).tolist():
        learner.hold(steps.step(i), float(rewards[i]))
    learner.age(rng)
    return rewards


def _already_called(
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


def _read_waiting(learner: Learner, steps: StepColumns, rng: np.random.Generator) -> None:
    """Failures that wait from before the run (live, or the run before) are read from their session's
    first step in it, before it is learned, as a live learner reads them when that call comes."""
    if steps.session is None:
        return
    first: dict[str, str] = {}
    for session, tool in zip(steps.session, steps.tool, strict=True):
        if session is not None and session not in first:
            first[session] = tool
    for session, tool in first.items():
        learner.read_waiting(session, rng, next_tool=tool)


def _watch(learner: Learner, steps: StepColumns, scaled: NDArray[np.float64], worked: NDArray[np.bool_]) -> None:
    """The adaptive ε and the drift guard see every replayed call, in order, as live ones."""
    for tool, value, ok in zip(steps.tool, scaled.tolist(), worked.tolist(), strict=True):
        learner.watch(tool, value, ok)


def _sequence_columns(
    learner: Learner, steps: StepColumns, arms: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """`Features.sequence_column` of each distinct history of the run (zeros with the sequences off),
    and each step's row in it."""
    histories = list(dict.fromkeys(tuple(history) for history in steps.history))
    history_of = {history: i for i, history in enumerate(histories)}
    if learner.config.sequences_enabled:
        sequence = learner.features.sequence_columns(histories, arms)
    else:
        sequence = np.zeros((len(histories), len(arms)))
    return sequence, np.array([history_of[tuple(history)] for history in steps.history], dtype=np.int64)


def _text_columns(
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
    in_order = everywhere and _in_order(tools)  # every tool, in id order: whole columns, no gather
    bm25 = lexical.scores_many(queries, remember=False)
    if not (in_order and len(tools) == bm25.shape[1]):
        bm25 = bm25.take(tools, 1)
    out[: len(queries), columns, 1 if semantic is not None else 0] = bm25
    if semantic is not None:
        vectors = np.stack([context.embedding for context in contexts[: len(queries)] if context.embedding is not None])
        documents = semantic.vectors[: len(tools)] if in_order else semantic.vectors.take(tools, 0)
        with one_blas_thread():
            cosine = vectors @ documents.T
        np.clip(cosine, 0.0, 1.0, out=cosine)
        out[: len(queries), columns, 0] = cosine
    cautious = np.flatnonzero(learner.index.caution_of(arms))
    if len(cautious):
        for i, query in enumerate(queries):
            out[i, cautious, :2] *= learner.features.kept(query, arms.take(cautious))[:, None]
    return out


def _in_order(arms: NDArray[np.int64]) -> bool:
    """Whether `arms` are 0, 1, …, n − 1: a gather of them is a copy."""
    return len(arms) == 0 or (int(arms[0]) == 0 and int(arms[-1]) == len(arms) - 1 and bool((np.diff(arms) == 1).all()))


def _query_contexts(learner: Learner, queries: list[str]) -> list[Context]:
    """The context of each distinct query, and last of none, as a policy reads it: the embedding alone
    (one call embeds them all), or without an embedder the encoded text."""
    semantic = learner.index.semantic
    if semantic is None:
        return [learner.encode(query, None, 0) for query in [*queries, None]]
    vectors = semantic.queries(queries) if queries else np.zeros((0, len(semantic.no_query)), np.float32)
    return [*(query_only(vector) for vector in vectors), query_only(semantic.no_query)]


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
    flags = None if steps.after_failure is None else np.asarray(steps.after_failure, dtype=bool)
    follow = learner.sequences.observe_batch(previous, steps.tool, histories, rewards, success, after_failure=flags)
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
