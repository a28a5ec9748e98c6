"""Per-tool metrics as one SQL statement: aggregation happens in the database, for every tool at once."""

from __future__ import annotations

from sqlalchemy import Float, Integer, Select, cast, func, select

from toolwise.feedback.schema import ExecutionRow, RatingRow


def tool_metrics_query(namespace: str, tool: str | None = None) -> Select[tuple]:  # type: ignore[type-arg]
    """calls, success rate, mean and p95 latency (nearest rank), mean rating and last use per tool.

    p95 uses window functions only (no percentile aggregate exists on SQLite): the nearest-rank p95 is
    the smallest latency whose rank r satisfies r ≥ 0.95·n, written in integers as 100·r ≥ 95·n.
    """
    e = ExecutionRow
    scope = [e.namespace == namespace] + ([e.tool == tool] if tool is not None else [])

    ranked = (
        select(
            e.tool,
            e.latency_ms,
            func.row_number().over(partition_by=e.tool, order_by=e.latency_ms).label("rank"),
            func.count().over(partition_by=e.tool).label("n"),
        )
        .where(*scope)
        .subquery("ranked")
    )
    p95 = (
        select(ranked.c.tool, func.min(ranked.c.latency_ms).label("p95"))
        .where(ranked.c.rank * 100 >= ranked.c.n * 95)
        .group_by(ranked.c.tool)
        .subquery("p95")
    )
    ratings = (
        select(
            e.tool,
            func.avg(cast(RatingRow.rating, Float)).label("avg_rating"),
            func.count(RatingRow.id).label("ratings"),
        )
        .join(RatingRow, RatingRow.execution_id == e.id)
        .where(*scope)
        .group_by(e.tool)
        .subquery("rated")
    )
    totals = (
        select(
            e.tool,
            func.count().label("calls"),
            func.avg(cast(e.success, Integer)).label("success_rate"),
            func.avg(e.latency_ms).label("avg_latency_ms"),
            func.max(e.finished_at).label("last_used"),
        )
        .where(*scope)
        .group_by(e.tool)
        .subquery("totals")
    )
    return (
        select(
            totals.c.tool,
            totals.c.calls,
            totals.c.success_rate,
            totals.c.avg_latency_ms,
            p95.c.p95,
            ratings.c.avg_rating,
            func.coalesce(ratings.c.ratings, 0),
            totals.c.last_used,
        )
        .outerjoin(p95, p95.c.tool == totals.c.tool)
        .outerjoin(ratings, ratings.c.tool == totals.c.tool)
        .order_by(totals.c.tool)
    )
