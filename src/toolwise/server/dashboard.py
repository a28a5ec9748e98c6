"""The dashboard at /dashboard: what is served and its health, the tools by use, the learning curves and
the recent sessions, read from the database through the queries `toolwise inspect` uses. Served by
`toolwise serve --http` beside /mcp, and alone by `toolwise dashboard` on any database.

Every read is bounded however long the log: the per-tool summaries (O(tools)), the instance registry,
the newest `RECENT_CALLS` executions by `(namespace, seq)`, and a trend over a window of time that
reads at most the newest `TREND_ROWS` executions. The page itself is `dashboard_page.py`'s."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from starlette.requests import Request

from toolwise.feedback import shown_url, utcnow
from toolwise.feedback.records import InstanceStatus, TrendBucket
from toolwise.server.auth import DASHBOARD

if TYPE_CHECKING:
    from toolwise.feedback import FeedbackService

WINDOWS = {"1h": 1.0, "24h": 24.0, "7d": 168.0, "30d": 720.0}  # the trend's look-back, hours
TREND_ROWS = 20_000  # the trend reads at most the newest this many executions of the namespace: its time grows
# with the rows read (bench/dashboard.py times the page), so a window holding more shows its newest calls, and says so
TREND_SLICES = 24
RECENT_CALLS = 400  # the sessions are those of the newest this many calls
SESSIONS = 12
INSTANCES = 8
REFRESH_S = 5  # how often an open page fetches itself again


@dataclass(frozen=True, slots=True)
class ToolRow:
    """A tool as the table shows it: the per-tool summaries kept with the log, merged."""

    tool: str
    calls: int
    success_rate: float
    avg_latency_ms: float
    p95_latency_ms: float
    mean_reward: float | None
    explored: int
    avg_rating: float | None
    last_used: datetime | None


# The columns the tools table sorts by (?sort=…), each with its key; a missing value sorts lowest.
SORTS = {
    "tool": lambda r: r.tool,
    "calls": lambda r: r.calls,
    "success": lambda r: r.success_rate,
    "latency": lambda r: r.avg_latency_ms,
    "p95": lambda r: r.p95_latency_ms,
    "reward": lambda r: float("-inf") if r.mean_reward is None else r.mean_reward,
    "explored": lambda r: r.explored,
    "rating": lambda r: 0.0 if r.avg_rating is None else r.avg_rating,
    "last_used": lambda r: r.last_used.timestamp() if r.last_used else 0.0,
}


@dataclass(frozen=True, slots=True)
class Step:
    tool: str
    success: bool
    reward: float | None


@dataclass(frozen=True, slots=True)
class Chain:
    """A session as its newest calls show it, oldest first, and how it ended if it did."""

    session_id: str
    steps: list[Step]
    last: datetime
    outcome: str | None
    total_reward: float | None


@dataclass(frozen=True, slots=True)
class Query:
    """What the page was asked for: the tools' sort and the trend's window (query parameters)."""

    sort: str = "calls"
    descending: bool = True
    window: str = "24h"

    @classmethod
    def of(cls, request: Request) -> Query:
        """The parameters of `request`; a value it does not know raises ValueError naming the choices."""
        params = request.query_params
        sort, order, window = params.get("sort", "calls"), params.get("order", "desc"), params.get("window", "24h")
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}, got {sort!r}")
        if order not in ("asc", "desc"):
            raise ValueError(f"order must be asc or desc, got {order!r}")
        if window not in WINDOWS:
            raise ValueError(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
        return cls(sort, order == "desc", window)

    def link(self, **changes: str) -> str:
        """This page's address with some parameters changed (what a header or a window link points to)."""
        params = {"sort": self.sort, "order": "desc" if self.descending else "asc", "window": self.window}
        params.update(changes)
        return DASHBOARD + "?" + "&".join(f"{k}={v}" for k, v in params.items())


@dataclass(frozen=True, slots=True)
class View:
    """Everything the page shows, read at `now`."""

    namespace: str
    database: str
    now: datetime
    executions: int
    snapshot: str
    instances: list[InstanceStatus]
    tools: list[ToolRow]
    trend: list[TrendBucket]
    trend_capped: bool  # the window holds more than `TREND_ROWS` executions: the trend shows the newest
    sessions: list[Chain]
    took_ms: float


async def gather(feedback: FeedbackService, namespace: str, database_url: str, query: Query) -> View:
    """Read what the page shows; every read is bounded (the module's docstring)."""
    started = time.perf_counter()
    now = utcnow()
    # First: a probe that finds the log moved (another process's writes) lets the tools' metrics be read again.
    head = (await feedback.reads.heads(namespace))[0]
    trend, capped = await _trend(feedback, namespace, head, now - timedelta(hours=WINDOWS[query.window]))
    snapshots = await feedback.snapshots.list(namespace)
    snapshot = (
        f"#{snapshots[0].id} {snapshots[0].source} {snapshots[0].created_at:%Y-%m-%d %H:%M} UTC"
        if snapshots
        else "none"
    )
    return View(
        namespace=namespace,
        database=shown_url(database_url),
        now=now,
        executions=await feedback.reads.count_executions(namespace),
        snapshot=snapshot,
        instances=await feedback.instances.list(namespace, limit=INSTANCES),
        tools=await _tools(feedback, namespace, query),
        trend=trend,
        trend_capped=capped,
        sessions=await _sessions(feedback, namespace),
        took_ms=(time.perf_counter() - started) * 1000,
    )


async def _tools(feedback: FeedbackService, namespace: str, query: Query) -> list[ToolRow]:
    """Every tool called, in the order asked for, from the per-tool summaries (O(tools))."""
    actions = {a.tool: a for a in await feedback.reports.action_summary(namespace)}
    tools = [
        ToolRow(
            m.tool,
            m.calls,
            m.success_rate,
            m.avg_latency_ms,
            m.p95_latency_ms,
            actions[m.tool].mean_reward if m.tool in actions else None,
            actions[m.tool].explored if m.tool in actions else 0,
            m.avg_rating,
            m.last_used,
        )
        for m in await feedback.reports.get_tool_metrics(namespace=namespace)
    ]
    tools.sort(key=SORTS[query.sort], reverse=query.descending)
    return tools


async def _trend(
    feedback: FeedbackService, namespace: str, head: int, since: datetime
) -> tuple[list[TrendBucket], bool]:
    """The window's slices, over at most the newest `TREND_ROWS` executions, and whether it holds more."""
    first = await feedback.reports.first_seq_since(since)
    if first is None:
        return [], False
    after = max(head - TREND_ROWS, first - 1)
    trend = await feedback.reports.trend(namespace=namespace, since=since, buckets=TREND_SLICES, after_seq=after)
    return trend, after > first - 1


async def _sessions(feedback: FeedbackService, namespace: str) -> list[Chain]:
    """The sessions of the newest calls, the most recently active first, each with its chain of tools
    and, once it ended, its outcome."""
    recent = await feedback.reports.get_recent_executions(RECENT_CALLS, namespace=namespace)
    ended = {e.session_id: e for e in reversed(await feedback.reports.get_episodes(namespace=namespace, limit=100))}
    chains: dict[str, list[Step]] = {}
    last: dict[str, datetime] = {}
    for e in recent:  # newest first
        if e.session_id not in chains:
            if len(chains) == SESSIONS:
                continue
            chains[e.session_id], last[e.session_id] = [], e.finished_at
        chains[e.session_id].append(Step(e.tool, e.success, e.reward))
    return [
        Chain(
            sid,
            steps[::-1],
            last[sid],
            ended[sid].outcome if sid in ended else None,
            ended[sid].total_reward if sid in ended else None,
        )
        for sid, steps in chains.items()
    ]
