"""SQLite: every stored time in one text form, Python's `isoformat(" ")` with "+00:00" (`SQLiteUTCText`).

The writer stored executions in that form, everything else (dead letters put back, ratings, episodes,
snapshots, instances, tool summaries) as "YYYY-MM-DD HH:MM:SS.ffffff". SQLite compares times as text, and
the two forms of one instant do not sort by the clock: a `--since`/`--until` equal to a finish time could
take or leave the wrong row. The other form is rewritten here (the rows that have no "+"; on a log the
writer wrote, a scan that changes nothing). PostgreSQL keeps timestamptz: nothing to do.

Revision ID: 0008
Revises: 0007
"""

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_TIMES = {
    "executions": ("started_at", "finished_at"),
    "tool_stats": ("last_used",),
    "ratings": ("created_at",),
    "episodes": ("started_at", "ended_at"),
    "snapshots": ("created_at",),
    "instances": ("started_at", "heartbeat_at", "stopped_at"),
}


def upgrade() -> None:
    conn = op.get_bind()
    if conn.dialect.name != "sqlite":
        return
    for table, columns in _TIMES.items():
        for column in columns:
            # "…SS.000000" → "…SS+00:00" (isoformat drops a zero fraction), "…SS.ffffff" → "…SS.ffffff+00:00"
            conn.exec_driver_sql(
                f"UPDATE {table} SET {column} = CASE WHEN substr({column}, 20) = '.000000' "
                f"THEN substr({column}, 1, 19) ELSE {column} END || '+00:00' WHERE instr({column}, '+') = 0"
            )


def downgrade() -> None:
    """Nothing to undo: the earlier code reads and compares this form as it did the writer's rows."""
