"""The semantic residual: per-tool ridge regression over the query's embedding, on top of the prior.

A tool's expected (normalised) reward for a query q is

    m_t(q) = c + β·prior_t(q) + θ_tᵀ x(q)

where prior_t is the semantic relevance of the tool to the query (cosine of their embeddings, see
`Learner.prior`), c is the running mean of the residual target r − β·prior over every observation (a
shared intercept: what the prior misses on average), and θ_t is tool t's ridge regression of the
residual on x(q), the first `dim` components of the query's embedding (the embedding is Matryoshka-
trained: its leading components are a coarser embedding of their own), L2-normalised.

Why this shape: a failed call of t for q lowers θ_tᵀx only for queries whose x points the same way
("not this tool for this kind of request"), never t everywhere (no per-tool bias term), and never
another tool; a success lifts t for that kind of request. Without an embedding (no embedder given to
the learner) x is the context's hashed feature vector folded onto `dim` components.

Memory: a full per-tool precision matrix over 256 components is 512 KB a tool (524 MB for 1,000
tools). Here A_t⁻¹ (A_t = λI + Σ x xᵀ) is kept over `dim` = 128 components as its upper triangle in
float32 (33 KB a tool) and updated by Sherman–Morrison, θ_t by the matching recursive-least-squares
step: exact ridge, no solve, and no BLAS call on an update (a multi-threaded BLAS on small matrices
is slow on a loaded machine). Deciding reads θ (one matrix-vector product over all tools)
and diag(A_t⁻¹) for the widths (the diagonal approximation of xᵀA_t⁻¹x).

Session context: after a session's first call the right tool often depends on the tool just used
(read a file, then edit it), whatever the query. So the model adds φ_t[b(prev)], tool t's residual
after a previous tool hashed into one of `previous_buckets` buckets: m_t(q, prev) = c + β·prior_t(q) +
θ_tᵀx(q) + φ_t[b(prev)]. The term is absent on a session's first call (no per-tool bias creeps in:
failures of t on first calls still only say "not t for this kind of request"), and a failure after
prev says "not t right after prev". The two blocks are fitted jointly with a block-diagonal precision
(A_t⁻¹ for x, a scalar per (bucket, tool) for the one-hot): one shared error split by each block's
uncertainty. φ and its precisions are stored bucket-major, (buckets, tools): 4 MB at 1,000 tools.

Catch-up (a log replayed at start-up) learns in batches (`learn_many`): rows are kept as they come
and settled together, per tool, from sufficient statistics (A += XᵀX, b += Xᵀy and the bucket sums):
the same A⁻¹, intercept and bucket precisions as one row at a time, and for (θ, φ) the exact joint
ridge posterior given the state before the batch (which the row-by-row step approximates by keeping
the two blocks' precisions apart). Every read of the state settles what is pending first.

The settings are semantic_config.py; how a batch's rows settle, semantic_settle.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray
from threadpoolctl import threadpool_limits

from toolwise.rl.context import Context
from toolwise.rl.ids import grown_rows
from toolwise.rl.policies.base import (
    Capabilities,
    Lesson,
    Lessons,
    PolicyBase,
    Selection,
    Update,
    best_k,
    check_state,
    optimistic_selection,
    state_head,
)
from toolwise.rl.policies.choice_features import query_features
from toolwise.rl.policies.semantic_config import SemanticConfig, previous_bucket
from toolwise.rl.policies.semantic_settle import Pending, by_tool, joint_posterior

SETTLE_ROWS = 200_000  # batched rows kept before they are settled (32 bytes a row, plus their queries' features)
SETTLE_BYTES = 64_000_000  # … or sooner, once they and their features take this much (a log of distinct queries)


class SemanticUCB(PolicyBase):
    name: ClassVar[str] = "semantic"
    SCHEMA: ClassVar[int] = 2  # 2 added the previous-tool block; a schema-1 state loads with it empty
    capabilities: ClassVar[Capabilities] = Capabilities(learn_many=True)  # exact statistics: no replay

    def __init__(self, config: SemanticConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or SemanticConfig()
        self._upper = np.triu_indices(c.dim)
        self._diagonal = np.flatnonzero(self._upper[0] == self._upper[1])  # where A_ii sits in a packed row
        packed_index = np.zeros((c.dim, c.dim), dtype=np.int64)
        packed_index[self._upper] = np.arange(len(self._upper[0]))
        self._unpack = np.maximum(packed_index, packed_index.T)  # full (i, j) → its packed slot
        self._identity = np.eye(c.dim)[self._upper].astype(np.float32) / c.regularisation
        self.theta = np.zeros((16, c.dim))
        self.a_inv = np.repeat(self._identity[None], 16, 0)  # packed upper triangles of A_t⁻¹
        self.inv_diag = np.full((16, c.dim), 1.0 / c.regularisation)
        self.after = np.zeros((c.previous_buckets, 16))  # φ: bucket-major, (buckets, tools)
        self.after_inv = np.full((c.previous_buckets, 16), 1.0 / c.regularisation)  # its 1/precision
        self.intercept = 0.0
        self.observed = 0
        self._buckets: dict[str, int] = {}
        self._pending: list[Pending] = []
        self._pending_rows = self._pending_bytes = 0
        self._precision: dict[int, NDArray[np.float64]] = {}  # A_t (float64) from the last settle, while batching
        self._stale: set[int] = set()  # tools whose A_t⁻¹ (and its diagonal) is yet to be inverted from A_t

    # -- features ----------------------------------------------------------------------------------

    def features(self, context: Context) -> NDArray[np.float64]:
        """x(q): the leading `dim` embedding components (or folded hashed features), unit length."""
        return query_features(context, self.config.dim)

    def bucket(self, context: Context) -> int | None:
        """The previous tool's bucket; None on a session's first call (or with the block off)."""
        return self._bucket_of(context.previous_tool)

    def _bucket_of(self, previous_tool: str | None) -> int | None:
        if previous_tool is None or not self.config.previous_buckets:
            return None
        found = self._buckets.get(previous_tool)
        if found is None:
            if len(self._buckets) >= 4096:  # bounded: emptied when full
                self._buckets.clear()
            found = self._buckets[previous_tool] = previous_bucket(previous_tool, self.config.previous_buckets)
        return found

    def _ensure(self, arm: int) -> None:
        rows = self.theta.shape[0]
        if arm < rows:
            return
        grow = grown_rows(rows, [arm]) - rows
        c = self.config
        self.theta = np.concatenate([self.theta, np.zeros((grow, c.dim))])
        self.a_inv = np.concatenate([self.a_inv, np.repeat(self._identity[None], grow, 0)])
        self.inv_diag = np.concatenate([self.inv_diag, np.full((grow, c.dim), 1.0 / c.regularisation)])
        self.after = np.concatenate([self.after, np.zeros((c.previous_buckets, grow))], axis=1)
        self.after_inv = np.concatenate(
            [self.after_inv, np.full((c.previous_buckets, grow), 1.0 / c.regularisation)], axis=1
        )

    # -- deciding ----------------------------------------------------------------------------------

    def _means(
        self, x: NDArray[np.float64], bucket: int | None, arms: NDArray[np.int64], prior: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        if len(arms):
            self._ensure(int(arms.max()))
        means = (self.theta @ x).take(arms)
        means += prior * self.config.prior_weight
        means += self.intercept
        if bucket is not None:
            means += self.after[bucket].take(arms)
        return means

    def expected(self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64]) -> NDArray[np.float64]:
        self.settle()
        return self._means(self.features(context), self.bucket(context), arms, prior)

    def select(
        self, context: Context, arms: NDArray[np.int64], prior: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        self.finish_batches()
        c = self.config
        x, bucket = self.features(context), self.bucket(context)
        means = self._means(x, bucket, arms, prior)
        if len(means) > c.shortlist:
            short = best_k(means, c.shortlist)
            arms, means = arms.take(short), means.take(short)
        # Width from diag(A⁻¹): cheap, and shrinking as a tool is tried on such queries (after such a tool).
        variance = self.inv_diag.take(arms, 0) @ (x * x)
        if bucket is not None:
            variance += self.after_inv[bucket].take(arms)
        return optimistic_selection(arms, means, np.sqrt(variance), c.alpha, c.epsilon, rng)

    # -- learning ----------------------------------------------------------------------------------

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        """Ridge step for the arm towards the residual reward − β·prior (centred by the running
        intercept), shared between the query block and, after a previous tool, its bucket."""
        context, arm, reward, prior = lesson.context, lesson.arm, lesson.reward, lesson.prior
        self.settle()
        self._ensure(arm)
        self._precision.pop(arm, None)
        x, bucket = self.features(context), self.bucket(context)
        target = reward - self.config.prior_weight * prior
        theta = self.theta[arm]
        after = float(self.after[bucket, arm]) if bucket is not None else 0.0
        error = target - self.intercept - float((theta * x).sum()) - after
        self.observed += 1
        self.intercept += (target - self.intercept) / self.observed
        residual = target - self.intercept - float((theta * x).sum()) - after  # against the updated intercept
        packed = self.a_inv[arm]
        u = (packed.take(self._unpack) * x).sum(axis=1)  # A⁻¹x (elementwise: no BLAS)
        spread = float((x * u).sum())  # xᵀA⁻¹x
        own = float(self.after_inv[bucket, arm]) if bucket is not None else 0.0
        denominator = 1.0 + spread + own
        rows, cols = self._upper
        packed -= ((u.take(rows) * u.take(cols)) / (1.0 + spread)).astype(np.float32)
        self.inv_diag[arm] = packed.take(self._diagonal)
        theta += u * (residual / denominator)
        if bucket is not None:
            self.after[bucket, arm] += own * residual / denominator
            self.after_inv[bucket, arm] = own / (1.0 + own)
        return Update(error, None)

    def learn_many(self, lessons: Lessons, rng: np.random.Generator) -> None:
        """Learn a run of calls in order. The running intercept moves now (it is order-dependent and
        cheap); the ridge statistics are kept and settled later (`settle`), at the latest when the state
        is read."""
        if not len(lessons):
            return
        contexts = lessons.contexts
        if all(c.embedding is not None for c in contexts):
            features = self._features_of(np.stack([c.embedding for c in contexts if c.embedding is not None]))
        else:
            features = np.stack([self.features(c) for c in contexts])
        self._learn_run(features, lessons.context_of, lessons.arms, lessons.previous, lessons.rewards, lessons.priors)

    def _learn_run(
        self,
        features: NDArray[np.float64],
        rows: NDArray[np.int64],
        arms: NDArray[np.int64],
        previous: Sequence[str | None],
        rewards: NDArray[np.float64],
        priors: NDArray[np.float64],
    ) -> None:
        """Step i chose `arms[i]` for the query with features `features[rows[i]]` after `previous[i]`,
        with normalised reward `rewards[i]` and prior `priors[i]`."""
        self._ensure(int(arms.max()))
        targets = rewards - self.config.prior_weight * priors
        counts = self.observed + np.arange(1, len(targets) + 1)
        intercepts = (self.intercept * self.observed + np.cumsum(targets)) / counts  # after each step
        self.intercept, self.observed = float(intercepts[-1]), int(counts[-1])
        buckets = np.array([-1 if (b := self._bucket_of(p)) is None else b for p in previous])
        self._pending.append(
            (features, np.asarray(rows, np.int64), np.asarray(arms, np.int64), buckets, targets - intercepts)
        )
        self._pending_rows += len(arms)
        self._pending_bytes += features.nbytes + 32 * len(arms)
        if self._pending_rows >= SETTLE_ROWS or self._pending_bytes >= SETTLE_BYTES:
            self._fold()  # A_t⁻¹ waits until something reads it: a replay settles several times

    def _features_of(self, embeddings: NDArray[np.float32]) -> NDArray[np.float64]:
        """x(q) of each embedding row, as `features` computes it for one."""
        dim = self.config.dim
        x = np.zeros((len(embeddings), dim))
        width = min(dim, embeddings.shape[1]) if embeddings.ndim == 2 else 0
        x[:, :width] = embeddings[:, :width]
        norms = np.sqrt((x * x).sum(axis=1))
        unit: NDArray[np.float64] = np.divide(x, norms[:, None], out=np.zeros_like(x), where=norms[:, None] > 0)
        return unit

    def settle(self) -> None:
        """Fold the pending batched rows into the state, tool by tool (see the module's docstring),
        A_t⁻¹ included."""
        self._fold()
        if self._stale:
            with threadpool_limits(limits=1, user_api="blas"):
                for tool in self._stale:
                    self.a_inv[tool] = np.linalg.inv(self._precision[tool])[self._upper].astype(np.float32)
                    self.inv_diag[tool] = self.a_inv[tool].take(self._diagonal)
            self._stale.clear()

    def _fold(self) -> None:
        """The pending rows into θ, φ and each tool's A_t (float64; its inverse is left stale)."""
        if not self._pending:
            return
        features, tools = by_tool(self._pending)
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        # One thread: a multi-threaded BLAS on 128×128 systems is far slower on a loaded machine (rl/blas.py).
        with threadpool_limits(limits=1, user_api="blas"):
            for tool, rows, buckets, y in tools:
                self._settle_tool(tool, features, rows, buckets, y)

    def finish_batches(self) -> None:
        """Batches are over: settle what they left and free their caches (each tool's A_t in float64,
        128 KB a tool, kept between settles so a replay never inverts the float32 A_t⁻¹ back)."""
        if self._pending or self._precision:
            self.settle()
            self._precision.clear()

    def _settle_tool(
        self,
        tool: int,
        features: NDArray[np.float64],
        rows: NDArray[np.int64],
        buckets: NDArray[np.int64],
        y: NDArray[np.float64],
    ) -> None:
        """Fold one tool's pending rows (residual targets y over x = features[rows], bucket or −1) into
        its ridge: `joint_posterior`, with the state as the prior."""
        before = self._precision.get(tool)
        if before is None:
            before = np.linalg.inv(self.a_inv[tool].take(self._unpack).astype(np.float64))
        used = np.unique(buckets[buckets >= 0])  # the order joint_posterior gives φ in
        theta, after, phi, phi_inv = joint_posterior(
            before, self.theta[tool], features, rows, y, buckets, self.after[used, tool], self.after_inv[used, tool]
        )
        self.after[used, tool], self.after_inv[used, tool] = phi, phi_inv
        self.theta[tool] = theta
        self._precision[tool] = after
        self._stale.add(tool)

    def forget(self, arm: int) -> None:
        """What was learned of one tool no longer holds (the drift guard saw its rewards change): its
        ridge (query and previous-tool blocks) starts afresh."""
        self.settle()
        self._ensure(arm)
        self._precision.pop(arm, None)
        self.theta[arm] = 0.0
        self.a_inv[arm] = self._identity
        self.inv_diag[arm] = 1.0 / self.config.regularisation
        self.after[:, arm] = 0.0
        self.after_inv[:, arm] = 1.0 / self.config.regularisation

    # -- state -------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        self.settle()
        return {
            **state_head(self.name, self.SCHEMA, self.config),
            "theta": self.theta.copy(),
            "a_inv": self.a_inv.copy(),
            "after": self.after.copy(),
            "after_inv": self.after_inv.copy(),
            "intercept": self.intercept,
            "observed": self.observed,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """A schema-1 state (before the previous-tool block) is migrated: its query block is kept and
        the block starts empty, as if the session context had never been seen."""
        check_state(state, self.name, 1 if state.get("schema") == 1 else self.SCHEMA)
        a_inv, after, after_inv = _loaded_arrays(state, self.config, len(self._upper[0]))
        self.a_inv = a_inv.copy()
        self.inv_diag = a_inv[:, self._diagonal].astype(np.float64)
        self.theta = np.asarray(state["theta"], dtype=np.float64).copy()
        self.after, self.after_inv = after.copy(), after_inv.copy()
        self.intercept, self.observed = float(state["intercept"]), int(state["observed"])
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
        self._precision.clear()
        self._stale.clear()

    def nbytes(self) -> int:
        return self.theta.nbytes + self.a_inv.nbytes + self.inv_diag.nbytes + self.after.nbytes + self.after_inv.nbytes


def _loaded_arrays(
    state: dict[str, Any], config: SemanticConfig, packed: int
) -> tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]:
    """A state's A⁻¹ (packed upper triangles) and previous-tool block, checked against `config`; a
    schema-1 state (before the block) gets it empty, as if the session context had never been seen."""
    a_inv = np.asarray(state["a_inv"], dtype=np.float32)
    if a_inv.shape[1:] != (packed,):
        learned = state["config"]["dim"]
        raise ValueError(f"state learned over {learned} components, this policy uses {config.dim}")
    tools, buckets = len(a_inv), config.previous_buckets
    if state["schema"] == 1:
        return a_inv, np.zeros((buckets, tools)), np.full((buckets, tools), 1.0 / config.regularisation)
    after = np.asarray(state["after"], dtype=np.float64)
    after_inv = np.asarray(state["after_inv"], dtype=np.float64)
    if after.shape != (buckets, tools) or after_inv.shape != (buckets, tools):
        raise ValueError(
            f"state's previous-tool block is {after.shape}, this policy uses ({buckets}, {tools}) "
            "(previous_buckets, tools)"
        )
    return a_inv, after, after_inv
