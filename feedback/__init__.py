"""What happened: the durable execution log, ratings, episodes and per-tool metrics."""

from toolwise.feedback.arguments import argument_digest, canonical_json
from toolwise.feedback.engine import default_database_url
from toolwise.feedback.errors import (
    DatabaseUnusableError,
    FeedbackError,
    InvalidOutcomeError,
    InvalidRatingError,
    ServiceNotStartedError,
    StoreUnavailableError,
    UnknownExecutionError,
)
from toolwise.feedback.records import OUTCOMES, Episode, Execution, Outcome, Rating, ToolMetrics, WriterStats, utcnow
from toolwise.feedback.service import FeedbackService

__all__ = [
    "OUTCOMES",
    "DatabaseUnusableError",
    "Episode",
    "Execution",
    "FeedbackError",
    "FeedbackService",
    "InvalidOutcomeError",
    "InvalidRatingError",
    "Outcome",
    "Rating",
    "ServiceNotStartedError",
    "StoreUnavailableError",
    "ToolMetrics",
    "UnknownExecutionError",
    "WriterStats",
    "argument_digest",
    "canonical_json",
    "default_database_url",
    "utcnow",
]
