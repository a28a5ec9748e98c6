"""A year of history: the log's order as an index, per-tool summaries maintained with the log.

`ix_executions_ns_seq` lets every log read (replay, sync, export) walk (namespace, seq) in order
instead of sorting the namespace per batch. `tool_stats` holds running per-tool summaries
(`toolwise.feedback.toolstats`), filled from the executions and ratings already logged by 0006.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from toolwise.feedback.schema import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_executions_ns_seq", "executions", ["namespace", "seq"])
    op.create_table(
        "tool_stats",
        sa.Column("namespace", sa.String(64), primary_key=True),
        sa.Column("tool", sa.String(128), primary_key=True),
        sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("successes", sa.Integer, nullable=False, server_default="0"),
        sa.Column("latency_sum_ms", sa.Float, nullable=False, server_default="0"),
        sa.Column("last_used", UTCDateTime, nullable=True),
        sa.Column("ratings", sa.Integer, nullable=False, server_default="0"),
        sa.Column("rating_sum", sa.Integer, nullable=False, server_default="0"),
        sa.Column("p95_latency_ms", sa.Float, nullable=False, server_default="0"),
        sa.Column("latency_offset", sa.Integer, nullable=False, server_default="0"),
        sa.Column("latency_counts", sa.LargeBinary, nullable=True),
    )
    # filled from the executions already logged by 0006, once the table has all its columns (the
    # filling uses the live `toolstats` code, which writes every column of today's table)


def downgrade() -> None:
    op.drop_table("tool_stats")
    op.drop_index("ix_executions_ns_seq", "executions")
