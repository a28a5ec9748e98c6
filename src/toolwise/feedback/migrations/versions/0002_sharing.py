"""Sharing and persistence: who recorded what, exploration, snapshots, running instances.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

from toolwise.feedback.schema import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("executions") as batch:
        batch.add_column(sa.Column("instance", sa.String(36), nullable=True))
        batch.add_column(sa.Column("explored", sa.Boolean, nullable=True))
    with op.batch_alter_table("ratings") as batch:
        batch.add_column(sa.Column("instance", sa.String(36), nullable=True))
    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("namespace", sa.String(64), nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("policy", sa.String(32), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime, nullable=False),
        sa.Column("sample_count", sa.Integer, nullable=False),
        sa.Column("covered", sa.JSON, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("signature", sa.LargeBinary, nullable=True),
        sa.Column("payload", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_snapshots_namespace", "snapshots", ["namespace"])
    op.create_table(
        "instances",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("namespace", sa.String(64), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("heartbeat_at", UTCDateTime, nullable=False),
        sa.Column("stopped_at", UTCDateTime, nullable=True),
        sa.Column("status", sa.JSON, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("instances")
    op.drop_index("ix_snapshots_namespace", "snapshots")
    op.drop_table("snapshots")
    with op.batch_alter_table("ratings") as batch:
        batch.drop_column("instance")
    with op.batch_alter_table("executions") as batch:
        batch.drop_column("explored")
        batch.drop_column("instance")
