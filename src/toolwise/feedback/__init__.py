"""What happened: the durable execution log (ratings, episodes, per-tool metrics), the snapshot store and
the instance registry, behind one `FeedbackService` that owns the database."""

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
from toolwise.feedback.instances import InstanceRegistry
from toolwise.feedback.log import ExecutionLog
from toolwise.feedback.records import OUTCOMES, Episode, Execution, Outcome, Rating, ToolMetrics, WriterStats, utcnow
from toolwise.feedback.service import FeedbackService, shown_url
from toolwise.feedback.snapshots import SnapshotStore

__all__ = [
    "OUTCOMES",
    "DatabaseUnusableError",
    "Episode",
    "Execution",
    "ExecutionLog",
    "FeedbackError",
    "FeedbackService",
    "InstanceRegistry",
    "InvalidOutcomeError",
    "InvalidRatingError",
    "Outcome",
    "Rating",
    "ServiceNotStartedError",
    "SnapshotStore",
    "StoreUnavailableError",
    "ToolMetrics",
    "UnknownExecutionError",
    "WriterStats",
    "argument_digest",
    "canonical_json",
    "default_database_url",
    "shown_url",
    "utcnow",
]
