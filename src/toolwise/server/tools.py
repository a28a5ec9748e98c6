"""The registry of toolwise's own MCP tools: each named, described and tied to its handler (the handlers
and their models live in `recommend.py`, `feedback_tools.py`, `admin_tools.py`, `snapshot_tools.py`)."""

from __future__ import annotations

from typing import Any

from toolwise.server.admin_tools import (
    LearningStatsOutput,
    SequencesInput,
    SequencesOutput,
    ToolMetricsInput,
    ToolMetricsOutput,
    get_learning_stats,
    get_successful_sequences,
    get_tool_metrics,
)
from toolwise.server.evaluation import EVALUATE_TOOL
from toolwise.server.feedback_tools import (
    EndSessionInput,
    EndSessionOutput,
    SubmitFeedbackInput,
    SubmitFeedbackOutput,
    end_session,
    submit_feedback,
)
from toolwise.server.own import NoInput, OwnTool
from toolwise.server.recommend import (
    RecommendNextInput,
    RecommendNextOutput,
    RecommendToolInput,
    RecommendToolOutput,
    recommend_next_tools,
    recommend_tool,
)
from toolwise.server.snapshot_tools import SNAPSHOT_TOOLS

# -- the registry -----------------------------------------------------------------------------------

TOOLS: list[OwnTool[Any, Any]] = [
    OwnTool(
        "recommend_tool",
        "Rank the tools for a task described in words, best first.",
        RecommendToolInput,
        RecommendToolOutput,
        recommend_tool,
        False,
        uses_store=False,
        waits=False,
    ),
    OwnTool(
        "recommend_next_tools",
        "The tools likely called next after the recent ones (a retry of a failed call included).",
        RecommendNextInput,
        RecommendNextOutput,
        recommend_next_tools,
        True,
        uses_store=False,
        waits=False,
        unlisted=("last_failed",),
    ),
    OwnTool(
        "submit_feedback",
        "Rate a tool call 1 (useless) to 5 (right): by execution_id (in its result's _meta), else the newest "
        "call of tool.",
        SubmitFeedbackInput,
        SubmitFeedbackOutput,
        submit_feedback,
        False,
    ),
    OwnTool(
        "end_session",
        "End the session with its outcome.",
        EndSessionInput,
        EndSessionOutput,
        end_session,
        False,
    ),
    OwnTool(
        "get_learning_stats",
        "Admin: what the learner knows, downstream health.",
        NoInput,
        LearningStatsOutput,
        get_learning_stats,
        True,
        admin=True,
        uses_store=False,
    ),
    OwnTool(
        "get_tool_metrics",
        "Admin: calls, success, latency, ratings per tool.",
        ToolMetricsInput,
        ToolMetricsOutput,
        get_tool_metrics,
        True,
        admin=True,
    ),
    OwnTool(
        "get_successful_sequences",
        "Admin: the most frequent successful tool sequences.",
        SequencesInput,
        SequencesOutput,
        get_successful_sequences,
        True,
        admin=True,
        uses_store=False,
    ),
]


def own_tools(*, admin: bool, snapshots: bool = False) -> dict[str, OwnTool[Any, Any]]:
    """Our tools by name: the admin ones only with `admin`, the snapshot ones only with `snapshots`."""
    tools = [*TOOLS, EVALUATE_TOOL] + (SNAPSHOT_TOOLS if snapshots else [])
    return {t.name: t for t in tools if admin or not t.admin}
