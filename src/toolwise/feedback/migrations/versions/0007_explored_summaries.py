"""Per-tool exploration counts beside the other running summaries, so `action_summary` is O(tools);
and episodes in (namespace, ended_at, id) order, so an export pages through them.

`inspect top-actions`, `compare`, `status` and `export` grouped every execution of the namespace
(seconds at a million rows). `tool_stats` now keeps how many calls followed an exploratory
recommendation; it is filled here from what is already logged (one grouped query), then maintained
with the log (inserts, pruning; `explored` is never revised). A database whose `tool_stats` is empty
(coming from before 0004) gets it filled whole here, from the executions and ratings logged.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

from toolwise.feedback import toolstats
from toolwise.feedback.schema import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

_BACKFILL_BATCH = 20_000

# The tables as this revision sees them (not the live schema, which later revisions may change).
_executions = sa.table(
    "executions",
    sa.column("seq", sa.Integer),
    sa.column("namespace", sa.String),
    sa.column("tool", sa.String),
    sa.column("success", sa.Boolean),
    sa.column("latency_ms", sa.Float),
    sa.column("finished_at", UTCDateTime),
    sa.column("reward", sa.Float),
    sa.column("explored", sa.Boolean),
    sa.column("id", sa.String),
)
_ratings = sa.table("ratings", sa.column("execution_id", sa.String), sa.column("rating", sa.Integer))
_tool_stats = sa.table(
    "tool_stats",
    sa.column("namespace", sa.String),
    sa.column("tool", sa.String),
    sa.column("explored", sa.Integer),
    sa.column("ratings", sa.Integer),
    sa.column("rating_sum", sa.Integer),
)


def upgrade() -> None:
    with op.batch_alter_table("tool_stats") as batch:
        batch.add_column(sa.Column("explored", sa.Integer, nullable=False, server_default="0"))
    op.create_index("ix_episodes_ns_ended", "episodes", ["namespace", "ended_at", "id"])
    conn = op.get_bind()
    filled = conn.execute(sa.text("SELECT count(*) FROM tool_stats")).scalar_one()
    if filled:  # summarised by an earlier toolwise: the exploration counts alone
        _backfill_explored(conn)
    else:
        _backfill(conn)


def _backfill_explored(conn: sa.Connection) -> None:
    e, t = _executions, _tool_stats
    totals = conn.execute(
        sa.select(e.c.namespace, e.c.tool, sa.func.count())
        .where(e.c.explored.is_(True))
        .group_by(e.c.namespace, e.c.tool)
    ).all()
    for namespace, tool, count in totals:
        conn.execute(sa.update(t).where(t.c.namespace == namespace, t.c.tool == tool).values(explored=count))


def _backfill(conn: sa.Connection) -> None:
    """Summarise what is already logged, a batch of executions at a time (bounded memory)."""
    e, r, t = _executions, _ratings, _tool_stats
    after = 0
    while True:
        rows = conn.execute(
            sa.select(
                e.c.seq, e.c.namespace, e.c.tool, e.c.success, e.c.latency_ms, e.c.finished_at, e.c.reward, e.c.explored
            )
            .where(e.c.seq > after)
            .order_by(e.c.seq)
            .limit(_BACKFILL_BATCH)
        ).all()
        if not rows:
            break
        toolstats.apply(conn, toolstats.deltas(r[1:] for r in rows))
        after = rows[-1][0]
    rated = conn.execute(
        sa.select(e.c.namespace, e.c.tool, sa.func.count(), sa.func.sum(r.c.rating))
        .join(r, r.c.execution_id == e.c.id)
        .group_by(e.c.namespace, e.c.tool)
    ).all()
    for namespace, tool, count, total in rated:
        conn.execute(
            sa.update(t).where(t.c.namespace == namespace, t.c.tool == tool).values(ratings=count, rating_sum=total)
        )


def downgrade() -> None:
    op.drop_index("ix_episodes_ns_ended", "episodes")
    with op.batch_alter_table("tool_stats") as batch:
        batch.drop_column("explored")
