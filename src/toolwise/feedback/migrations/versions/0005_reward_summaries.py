"""Per-tool reward sums beside the other running summaries, so the mean reward per call is O(tools).

`get_learning_stats` averaged the reward over every execution of the namespace (a grouped scan of the
whole log, seconds at a million rows, on every call). `tool_stats` now keeps the sum of the rewards and
the number of calls that have one; they are filled here from what is already logged (one grouped
query), then maintained with the log (inserts, revised rewards, pruning). A database coming from
before 0004 gets its whole `tool_stats` filled by 0007, once the table has all its columns.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# The tables as this revision sees them (not the live schema, which later revisions may change).
_executions = sa.table(
    "executions", sa.column("namespace", sa.String), sa.column("tool", sa.String), sa.column("reward", sa.Float)
)
_tool_stats = sa.table(
    "tool_stats",
    sa.column("namespace", sa.String),
    sa.column("tool", sa.String),
    sa.column("reward_sum", sa.Float),
    sa.column("rewarded", sa.Integer),
)


def upgrade() -> None:
    with op.batch_alter_table("tool_stats") as batch:
        batch.add_column(sa.Column("reward_sum", sa.Float, nullable=False, server_default="0"))
        batch.add_column(sa.Column("rewarded", sa.Integer, nullable=False, server_default="0"))
    conn = op.get_bind()
    filled = conn.execute(sa.text("SELECT count(*) FROM tool_stats")).scalar_one()
    if filled:  # summarised by an earlier toolwise (0004's filling): the rewards alone
        _backfill_rewards(conn)
    # an empty table is filled whole by 0007 (the filling uses the live `toolstats` code, which writes
    # every column of today's table)


def _backfill_rewards(conn: sa.Connection) -> None:
    e, t = _executions, _tool_stats
    totals = conn.execute(
        sa.select(
            e.c.namespace, e.c.tool, sa.func.coalesce(sa.func.sum(e.c.reward), 0.0), sa.func.count(e.c.reward)
        ).group_by(e.c.namespace, e.c.tool)
    ).all()
    for namespace, tool, total, count in totals:
        conn.execute(
            sa.update(t).where(t.c.namespace == namespace, t.c.tool == tool).values(reward_sum=total, rewarded=count)
        )


def downgrade() -> None:
    with op.batch_alter_table("tool_stats") as batch:
        batch.drop_column("rewarded")
        batch.drop_column("reward_sum")
