"""Per-tool metrics and action summaries recomputed from every execution in one SQL statement
(O(executions), exact p95): the check the maintained summaries of `feedback/toolstats.py` are tested
against; nothing in toolwise needs it at run time."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, Integer, Select, cast, func, select

from toolwise.feedback import FeedbackService, ToolMetrics
from toolwise.feedback.records import ActionSummary
from toolwise.feedback.schema import ExecutionRow, RatingRow, UTCDateTime


async def recompute_tool_metrics(
    service: FeedbackService, tool: str | None = None, *, namespace: str = "default"
) -> list[ToolMetrics]:
    """What `service.reports.get_tool_metrics` answers, computed from the log itself."""
    await service.flush()
    async with service.engine.connect() as conn:
        result = await conn.execute(tool_metrics_query(namespace, tool))
        return [
            ToolMetrics(
                tool=name,
                calls=calls,
                success_rate=float(success_rate),
                avg_latency_ms=float(avg_latency),
                p95_latency_ms=float(p95),
                avg_rating=None if avg_rating is None else float(avg_rating),
                ratings=int(ratings),
                last_used=_as_utc(last_used),
            )
            for name, calls, success_rate, avg_latency, p95, avg_rating, ratings, last_used in result
        ]


def _as_utc(value: datetime | str) -> datetime:
    """max() over a UTCDateTime column loses the type on SQLite; parse and mark it UTC again."""
    parsed = datetime.fromisoformat(value) if isinstance(value, str) else value
    result = UTCDateTime().process_result_value(parsed, None)  # type: ignore[arg-type]  # the dialect is unused
    assert result is not None
    return result


def tool_metrics_query(namespace: str, tool: str | None = None) -> Select[tuple[Any, ...]]:
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


async def recompute_action_summary(service: FeedbackService, namespace: str = "default") -> list[ActionSummary]:
    """What `service.reports.action_summary` answers, grouped from the log itself."""
    e = ExecutionRow
    query = (
        select(
            e.tool,
            func.count().label("calls"),
            func.avg(e.reward).label("mean_reward"),
            func.avg(cast(cast(e.success, Integer), Float)).label("success_rate"),
            func.sum(cast(e.explored, Integer)).label("explored"),
        )
        .where(e.namespace == namespace)
        .group_by(e.tool)
        .order_by(func.count().desc(), e.tool)
    )
    await service.flush()
    async with service.engine.connect() as conn:
        return [
            ActionSummary(
                r.tool,
                r.calls,
                None if r.mean_reward is None else float(r.mean_reward),
                float(r.success_rate),
                int(r.explored or 0),
            )
            for r in await conn.execute(query)
        ]
