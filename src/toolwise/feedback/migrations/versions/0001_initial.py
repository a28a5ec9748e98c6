"""The execution log, ratings and episodes.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

from toolwise.feedback.schema import UTCDateTime

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "executions",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False, unique=True),
        sa.Column("namespace", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("tool", sa.String(128), nullable=False),
        sa.Column("server", sa.String(128), nullable=False),
        sa.Column("argument_digest", sa.String(64), nullable=False),
        sa.Column("arguments", sa.JSON, nullable=True),
        sa.Column("context_hash", sa.String(64), nullable=True),
        sa.Column("query", sa.Text, nullable=True),
        sa.Column("previous_tool", sa.String(128), nullable=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("decision_id", sa.String(36), nullable=True),
        sa.Column("propensity", sa.Float, nullable=True),
        sa.Column("success", sa.Boolean, nullable=False),
        sa.Column("error_type", sa.String(128), nullable=True),
        sa.Column("error_message", sa.Text, nullable=True),
        sa.Column("latency_ms", sa.Float, nullable=False),
        sa.Column("result_size", sa.Integer, nullable=False),
        sa.Column("reward", sa.Float, nullable=True),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("finished_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_executions_ns_tool", "executions", ["namespace", "tool"])
    op.create_index("ix_executions_session", "executions", ["session_id"])
    op.create_index("ix_executions_finished", "executions", ["finished_at"])
    op.create_table(
        "ratings",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("execution_id", sa.String(36), sa.ForeignKey("executions.id"), nullable=False),
        sa.Column("rating", sa.Integer, nullable=False),
        sa.Column("comment", sa.Text, nullable=True),
        sa.Column("created_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_ratings_execution_id", "ratings", ["execution_id"])
    op.create_table(
        "episodes",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("namespace", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("tools", sa.JSON, nullable=False),
        sa.Column("total_reward", sa.Float, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=False),
    )
    op.create_index("ix_episodes_session_id", "episodes", ["session_id"])


def downgrade() -> None:
    op.drop_table("episodes")
    op.drop_table("ratings")
    op.drop_table("executions")
