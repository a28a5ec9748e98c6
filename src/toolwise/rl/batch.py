"""Learning a run of logged executions at once: the catch-up after start-up, a replay of the log.

One step at a time the learner spends most of a replay on per-step overhead (embedding and scoring
the query, the policy's step, n-gram look-ups). Here the order-dependent parts stay a plain loop,
cheap per step (each tool's running latency and so the reward's speed bonus, the n-gram counts and
the prior's "follows the previous tool" evidence, the reward sum), while the run's distinct queries
are embedded once and the policy learns the whole run at once (`Policy.learn_many`). A policy that
does not declare `learn_many` learns step by step, as `Learner.learn` does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.batch_columns import already_called, query_contexts, query_part, sequence_columns, text_columns
from toolwise.rl.batch_view import Learner
from toolwise.rl.context import query_only
from toolwise.rl.hindsight import readings
from toolwise.rl.policies.base import Lessons, no_pause
from toolwise.rl.reward import check_latency, check_rating
from toolwise.rl.steps import StepColumns, worked


def learn_run(
    learner: Learner,
    steps: StepColumns,
    rng: np.random.Generator,
    minibatch: int | None = None,
    pause: Callable[[], None] = no_pause,
) -> NDArray[np.float64]:
    """Learn `steps` in order, as `learner.learn` would one by one; returns each step's reward. A policy that
    learns calls among candidates takes `minibatch` calls a step (None: its own, for a log's replay), and
    `pause()` is called between the parts of the run (`Lessons.pause`): the model's state is whole there, the
    run part-learned (its rewards, latencies and n-grams counted; the policy's minibatches in order).
    A policy that learns from the query's embedding alone (not a choice among candidates, whose rows
    carry the text) needs the embedding: with a lexical prior it learns step by step."""
    capabilities = learner.policy.capabilities
    if not capabilities.learn_many or not (capabilities.candidates or learner.index.semantic is not None):
        return np.array([learner.learn(steps.step(i), rng).reward for i in range(len(steps))], dtype=np.float64)
    if not len(steps):
        return np.zeros(0)
    if capabilities.candidates:
        return _learn_choices(learner, steps, rng, minibatch, pause)
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
    embeddings, base = query_part(learner, queries, rows, arms)
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


def _learn_choices(
    learner: Learner,
    steps: StepColumns,
    rng: np.random.Generator,
    minibatch: int | None,
    pause: Callable[[], None],
) -> NDArray[np.float64]:
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
    sequence, history_at = sequence_columns(learner, steps, arms)
    rewards, _ = _ordered_part(learner, steps, arm_list, follow=False)  # the rows carry no follow evidence
    queries = list(dict.fromkeys(q for q in steps.query if q))
    contexts = query_contexts(learner, queries)  # embeds them in one call (memoised for the text columns)
    text = text_columns(learner, queries, contexts, arms)  # with the caution on tools that write
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
            history, starts = history_at.take(calls), first.take(calls)
            block[~starts, :, 2] = sequence.take(history[~starts], 0)
            block[starts, :, 3] = sequence.take(history[starts], 0)
        owners, at = already_called(calls.tolist(), first, steps.history, position, seen)
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
        minibatch,
        pause,
    )
    pause()
    learner.policy.learn_many(lessons, rng)
    learner.count(rewards)
    for i in np.flatnonzero(pending).tolist():
        learner.hold(steps.step(i), float(rewards[i]))
    learner.age(rng)
    return rewards


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


def _ordered_part(
    learner: Learner, steps: StepColumns, arms: list[int], *, follow: bool = True
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The steps' rewards and the prior's follow evidence (−1 where there is none; all −1 without
    `follow`, for a policy that does not read it), as the step-by-step path has them: reward from the
    tool's running latency before the step, follow evidence from the n-grams before it, then latency and
    n-grams updated."""
    rewards, success = _rewards(learner, steps, arms)
    known = len(learner.index.lexical)  # tools the prior scores (the catalogue at the last set_tools)
    previous = [p if arm < known else None for p, arm in zip(steps.previous_tool, arms, strict=True)]
    histories = steps.history if learner.config.sequences_enabled else None
    if steps.rating is not None:
        success = np.fromiter(map(worked, success.tolist(), steps.rating), dtype=bool, count=len(success))
    flags = None if steps.after_failure is None else np.asarray(steps.after_failure, dtype=bool)
    evidence = learner.sequences.observe_batch(
        previous, steps.tool, histories, rewards, success, after_failure=flags, look_up=follow
    )
    return rewards, evidence


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
