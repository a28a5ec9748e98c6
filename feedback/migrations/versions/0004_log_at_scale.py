"""A year of history: the log's order as an index, per-tool summaries maintained with the log.

`ix_executions_ns_seq` lets every log read (replay, sync, export) walk (namespace, seq) in order
instead of sorting the namespace per batch. `tool_stats` holds running per-tool summaries
(`toolwise.feedback.toolstats`), filled here from the executions and ratings already logged.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

from toolwise.feedback import toolstats
from toolwise.feedback.schema import UTCDateTime

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_BACKFILL_BATCH = 20_000


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
    _backfill(op.get_bind())


def _backfill(conn: sa.Connection) -> None:
    """Summarise what is already logged, a batch of executions at a time (bounded memory)."""
    e = sa.table(
        "executions",
        sa.column("seq", sa.Integer),
        sa.column("namespace", sa.String),
        sa.column("tool", sa.String),
        sa.column("success", sa.Boolean),
        sa.column("latency_ms", sa.Float),
        sa.column("finished_at", UTCDateTime),
        sa.column("id", sa.String),
    )
    after = 0
    while True:
        rows = conn.execute(
            sa.select(e.c.seq, e.c.namespace, e.c.tool, e.c.success, e.c.latency_ms, e.c.finished_at)
            .where(e.c.seq > after)
            .order_by(e.c.seq)
            .limit(_BACKFILL_BATCH)
        ).all()
        if not rows:
            break
        toolstats.apply(conn, toolstats.deltas(r[1:] for r in rows))
        after = rows[-1][0]
    r = sa.table("ratings", sa.column("execution_id", sa.String), sa.column("rating", sa.Integer))
    rated = conn.execute(
        sa.select(e.c.namespace, e.c.tool, sa.func.count(), sa.func.sum(r.c.rating))
        .join(r, r.c.execution_id == e.c.id)
        .group_by(e.c.namespace, e.c.tool)
    ).all()
    t = sa.table(
        "tool_stats",
        sa.column("namespace", sa.String),
        sa.column("tool", sa.String),
        sa.column("ratings", sa.Integer),
        sa.column("rating_sum", sa.Integer),
    )
    for namespace, tool, count, total in rated:
        conn.execute(
            sa.update(t).where(t.c.namespace == namespace, t.c.tool == tool).values(ratings=count, rating_sum=total)
        )


def downgrade() -> None:
    op.drop_table("tool_stats")
    op.drop_index("ix_executions_ns_seq", "executions")
