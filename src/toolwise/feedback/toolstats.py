"""Per-tool metrics maintained as the log grows, so reading them costs O(tools), not O(log).

Each (namespace, tool) has one `tool_stats` row: running counts (calls, successes, latency sum, ratings,
rating sum), the last use, and a latency histogram over fixed logarithmic buckets (DDSketch's mapping:
bucket i holds latencies in (γ^(i-1), γ^i] ms, γ = (1+α)/(1-α), so any quantile read from it is within
a relative error α = 1% of the exact nearest-rank value). The histogram is mergeable (bucket counts
add), so a batch's latencies are folded in with one read-modify-write of the rows it touches, in the
transaction that inserts the batch: the summaries never disagree with the log. The p95 is read off
the histogram then and stored beside it, so `get_tool_metrics` reads a few numbers per tool.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite

from toolwise.feedback.records import ActionSummary, ToolMetrics
from toolwise.feedback.schema import ToolStatsRow

if TYPE_CHECKING:
    from toolwise.feedback.rows import Summary

RELATIVE_ACCURACY = 0.01  # α: a quantile is within ±1% of the exact nearest-rank latency
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_LATENCY_MS = 1e-3  # latencies below a microsecond share the lowest bucket


def bucket_of(latency_ms: float) -> int:
    """The histogram bucket of a latency (ms)."""
    return math.ceil(math.log(max(latency_ms, MIN_LATENCY_MS)) / _LOG_GAMMA)


def quantile(offset: int, counts: NDArray[np.int64], q: float) -> float:
    """The nearest-rank q-quantile (ms) of a histogram whose first bucket is `offset`: the bucket
    holding the ⌈q·n⌉-th smallest latency, reported at the value with the least relative error."""
    n = int(counts.sum())
    if n == 0:
        return 0.0
    rank = max(math.ceil(q * n - 1e-9), 1)
    index = int(np.searchsorted(np.cumsum(counts), rank)) + offset
    return 2 * GAMMA**index / (GAMMA + 1)


@dataclass(slots=True)
class Delta:
    """What a batch of executions adds to one tool's row."""

    calls: int = 0
    successes: int = 0
    latency_sum_ms: float = 0.0
    reward_sum: float = 0.0
    rewarded: int = 0
    explored: int = 0
    last_used: datetime | None = None
    buckets: dict[int, int] = field(default_factory=dict)


Key = tuple[str, str]  # (namespace, tool)


def deltas(rows: Iterable[Summary]) -> dict[Key, Delta]:
    """Per (namespace, tool), what rows of (namespace, tool, success, latency ms, finished at, reward,
    explored) add."""
    out: dict[Key, Delta] = {}
    for namespace, tool, success, latency_ms, finished_at, reward, explored in rows:
        d = out.get((namespace, tool))
        if d is None:
            d = out[(namespace, tool)] = Delta()
        d.calls += 1
        d.successes += bool(success)
        d.latency_sum_ms += latency_ms
        if reward is not None:
            d.reward_sum += reward
            d.rewarded += 1
        d.explored += bool(explored)
        if d.last_used is None or finished_at > d.last_used:
            d.last_used = finished_at
        bucket = bucket_of(latency_ms)
        d.buckets[bucket] = d.buckets.get(bucket, 0) + 1
    return out


def _histogram(blob: bytes | None) -> NDArray[np.int64]:
    return np.frombuffer(blob, dtype="<i8") if blob else np.zeros(0, dtype=np.int64)


def _merge(offset: int, counts: NDArray[np.int64], add: dict[int, int], sign: int) -> tuple[int, NDArray[np.int64]]:
    """Fold `add` into a histogram (sign −1 subtracts); returns the new offset and counts."""
    if not add:
        return offset, counts
    low, high = min(add), max(add)
    if len(counts):
        low, high = min(low, offset), max(high, offset + len(counts) - 1)
    merged = np.zeros(high - low + 1, dtype=np.int64)
    if len(counts):
        merged[offset - low : offset - low + len(counts)] = counts
    for bucket, n in add.items():
        merged[bucket - low] += sign * n
    nonzero = np.flatnonzero(merged)
    if not len(nonzero):
        return 0, np.zeros(0, dtype=np.int64)
    return low + int(nonzero[0]), merged[nonzero[0] : nonzero[-1] + 1]


_t = ToolStatsRow
# Built once: a batch binds its values to these (compiled once per dialect and cached), where statements
# built per batch cost the writer thread, which holds the GIL meanwhile, more than the inserts themselves.
_CREATE = {  # executemany of one statement; a multi-row VALUES would compile anew for every batch size
    "postgresql": postgresql.insert(_t).on_conflict_do_nothing(),
    "sqlite": sqlite.insert(_t).on_conflict_do_nothing(),
}
_CURRENT = (
    select(_t.namespace, _t.tool, _t.calls, _t.successes, _t.latency_sum_ms, _t.reward_sum, _t.rewarded, _t.last_used)
    .add_columns(_t.explored, _t.latency_offset, _t.latency_counts)
    .where(_t.namespace == bindparam("namespace"), _t.tool.in_(bindparam("tools", expanding=True)))
    .order_by(_t.tool)
    .with_for_update()
)
_UPDATED = (
    "calls",
    "successes",
    "latency_sum_ms",
    "reward_sum",
    "rewarded",
    "explored",
    "last_used",
    "p95_latency_ms",
    "latency_offset",
    "latency_counts",
)
_UPDATE = (
    update(_t)
    .where(_t.namespace == bindparam("k_namespace"), _t.tool == bindparam("k_tool"))
    .values({c: bindparam(c) for c in _UPDATED})
)


def apply(conn: Connection, changes: dict[Key, Delta], sign: int = 1) -> None:
    """Fold executions into (sign +1) or out of (−1, retention) their tools' rows, in the caller's
    transaction. Rows are created if missing and locked in key order on PostgreSQL (instances that
    write at once wait for each other, never deadlock)."""
    if not changes:
        return
    keys = sorted(changes)
    create = _CREATE["postgresql" if conn.dialect.name == "postgresql" else "sqlite"]
    conn.execute(create, [{"namespace": ns, "tool": tool} for ns, tool in keys])
    current = {}
    for namespace in sorted({ns for ns, _ in keys}):
        tools = [tool for ns, tool in keys if ns == namespace]
        current.update(
            {(r.namespace, r.tool): r for r in conn.execute(_CURRENT, {"namespace": namespace, "tools": tools})}
        )
    updates = []
    for key in keys:
        d, row = changes[key], current[key]
        offset, counts = _merge(row.latency_offset, _histogram(row.latency_counts), d.buckets, sign)
        last = row.last_used if sign < 0 or d.last_used is None else max(filter(None, (row.last_used, d.last_used)))
        updates.append(
            {
                "k_namespace": key[0],
                "k_tool": key[1],
                "calls": row.calls + sign * d.calls,
                "successes": row.successes + sign * d.successes,
                "latency_sum_ms": row.latency_sum_ms + sign * d.latency_sum_ms,
                "reward_sum": row.reward_sum + sign * d.reward_sum,
                "rewarded": row.rewarded + sign * d.rewarded,
                "explored": row.explored + sign * d.explored,
                "last_used": last,
                "p95_latency_ms": quantile(offset, counts, 0.95),
                "latency_offset": offset,
                "latency_counts": counts.astype("<i8").tobytes(),
            }
        )
    conn.execute(_UPDATE, updates)


def change_reward(conn: Connection, namespace: str, tool: str, old: float | None, new: float) -> None:
    """An execution's reward was revised (a rating): its tool's reward sum follows."""
    t = ToolStatsRow
    conn.execute(
        update(t)
        .where(t.namespace == namespace, t.tool == tool)
        .values(reward_sum=t.reward_sum + (new - (old or 0.0)), rewarded=t.rewarded + int(old is None))
    )


def mean_reward(rows: Iterable[Any]) -> float | None:
    """The mean reward per rewarded call over `tool_stats` rows of (reward_sum, rewarded)."""
    total, n = 0.0, 0
    for reward_sum, rewarded in rows:
        total, n = total + reward_sum, n + rewarded
    return total / n if n else None


def add_ratings(conn: Connection, ratings: Sequence[tuple[str, str, int]], sign: int = 1) -> None:
    """Count ratings given as (namespace, tool, rating) into (or, sign −1, out of) their tools' rows."""
    t = ToolStatsRow
    for namespace, tool, rating in ratings:
        conn.execute(
            update(t)
            .where(t.namespace == namespace, t.tool == tool)
            .values(ratings=t.ratings + sign, rating_sum=t.rating_sum + sign * rating)
        )


_T = ToolStatsRow
METRICS_COLUMNS = (
    _T.tool,
    _T.calls,
    _T.successes,
    _T.latency_sum_ms,
    _T.p95_latency_ms,
    _T.rating_sum,
    _T.ratings,
    _T.last_used,
)  # what `metrics` reads, in the order it unpacks them


def metrics(rows: Iterable[Any]) -> list[ToolMetrics]:
    """ToolMetrics from `tool_stats` rows of `METRICS_COLUMNS` (tools with no calls left out); p95 was
    computed from the histogram when the row was written, so reading needs no histogram. Rows are
    unpacked by position: reading a SQLAlchemy row's columns by name was most of get_tool_metrics' read."""
    return [
        ToolMetrics(
            tool=tool,
            calls=calls,
            success_rate=successes / calls,
            avg_latency_ms=latency_sum_ms / calls,
            p95_latency_ms=p95_latency_ms,
            avg_rating=rating_sum / ratings if ratings else None,
            ratings=ratings,
            last_used=last_used,
        )
        for tool, calls, successes, latency_sum_ms, p95_latency_ms, rating_sum, ratings, last_used in rows
        if calls > 0
    ]


def actions(rows: Iterable[Any]) -> list[ActionSummary]:
    """ActionSummary from `tool_stats` rows, in the order given (tools with no calls left out): the
    mean reward is over the calls that have one, as the log's average is."""
    return [
        ActionSummary(
            r.tool, r.calls, r.reward_sum / r.rewarded if r.rewarded else None, r.successes / r.calls, r.explored
        )
        for r in rows
        if r.calls > 0
    ]
