"""What happened: the durable execution log (ratings, episodes, per-tool metrics), the snapshot store and
the instance registry, behind one `FeedbackService` that owns the database."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported on first use (toolwise/lazy.py): the package's light modules stay light
    from toolwise.feedback.arguments import argument_digest, canonical_json
    from toolwise.feedback.errors import (
        DatabaseUnusableError,
        FeedbackError,
        InvalidOutcomeError,
        InvalidRatingError,
        ServiceNotStartedError,
        StoreUnavailableError,
        UnknownExecutionError,
    )
    from toolwise.feedback.files import default_database_url
    from toolwise.feedback.instances import InstanceRegistry
    from toolwise.feedback.log import ExecutionLog
    from toolwise.feedback.records import (
        OUTCOMES,
        Episode,
        Execution,
        Outcome,
        Rating,
        ToolMetrics,
        WriterStats,
        utcnow,
    )
    from toolwise.feedback.service import FeedbackService, shown_url
    from toolwise.feedback.snapshots import SnapshotStore
else:
    from toolwise.lazy import lazy_exports

    __getattr__ = lazy_exports(
        __name__,
        {
            "arguments": ("argument_digest", "canonical_json"),
            "errors": (
                "DatabaseUnusableError",
                "FeedbackError",
                "InvalidOutcomeError",
                "InvalidRatingError",
                "ServiceNotStartedError",
                "StoreUnavailableError",
                "UnknownExecutionError",
            ),
            "files": ("default_database_url",),
            "instances": ("InstanceRegistry",),
            "log": ("ExecutionLog",),
            "records": (
                "OUTCOMES",
                "Episode",
                "Execution",
                "Outcome",
                "Rating",
                "ToolMetrics",
                "WriterStats",
                "utcnow",
            ),
            "service": ("FeedbackService", "shown_url"),
            "snapshots": ("SnapshotStore",),
        },
    )

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
