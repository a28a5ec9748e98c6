"""Episode ends in the shared log: an order to walk them in, who ended each, and its last call.

`end_session` teaches a TD learner that the session's last step was terminal; an instance syncing the
log (or a start replaying it) must learn the same, once, after that step. So an episode gets `seq`
(an autoincrementing key, the order syncs walk from a watermark, as executions and ratings are
walked), `instance` (who ended it, having learned it live) and `last_execution` (the id of the step
learned as terminal). The table is rebuilt around the new key (a primary key cannot be added in
place on SQLite); existing episodes are numbered in the order they ended, and their last execution
is the session's last call finished by then.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from toolwise.feedback.schema import UTCDateTime

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = ("id", "namespace", "session_id", "tools", "total_reward", "outcome", "started_at", "ended_at")


def _episodes(name: str, *, ends: bool) -> sa.Table:
    """The episodes table as this revision makes it (`ends`) or finds it, under `name`."""
    key = [sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True)] if ends else []
    return sa.Table(
        name,
        sa.MetaData(),
        *key,
        sa.Column("id", sa.String(36), nullable=False, unique=ends, primary_key=not ends),
        sa.Column("namespace", sa.String(64), nullable=False),
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("tools", sa.JSON, nullable=False),
        sa.Column("total_reward", sa.Float, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("started_at", UTCDateTime, nullable=False),
        sa.Column("ended_at", UTCDateTime, nullable=False),
        *([sa.Column("instance", sa.String(36)), sa.Column("last_execution", sa.String(36))] if ends else []),
    )


def _rebuild(ends: bool) -> None:
    """Copy the episodes into a new table of the wanted shape (in the order they ended) and swap it in."""
    old, new = _episodes("episodes", ends=not ends), _episodes("episodes_new", ends=ends)
    new.create(op.get_bind())
    columns = [new.c[name] for name in _COLUMNS]
    op.execute(
        new.insert().from_select(columns, sa.select(*(old.c[name] for name in _COLUMNS)).order_by(old.c.ended_at))
    )
    op.drop_table("episodes")  # and its indexes
    op.rename_table("episodes_new", "episodes")
    op.create_index("ix_episodes_session_id", "episodes", ["session_id"])
    if ends:
        op.create_index("ix_episodes_ns_seq", "episodes", ["namespace", "seq"])
        op.create_index("ix_episodes_last_execution", "episodes", ["last_execution"])


def upgrade() -> None:
    _rebuild(ends=True)
    e = sa.table(
        "executions",
        sa.column("id", sa.String),
        sa.column("seq", sa.Integer),
        sa.column("namespace", sa.String),
        sa.column("session_id", sa.String),
        sa.column("finished_at", UTCDateTime),
    )
    episodes = _episodes("episodes", ends=True)
    last = (
        sa.select(e.c.id)
        .where(
            e.c.namespace == episodes.c.namespace,
            e.c.session_id == episodes.c.session_id,
            e.c.finished_at <= episodes.c.ended_at,
        )
        .order_by(e.c.seq.desc())
        .limit(1)
        .scalar_subquery()
    )
    op.execute(episodes.update().values(last_execution=last))


def downgrade() -> None:
    _rebuild(ends=False)
