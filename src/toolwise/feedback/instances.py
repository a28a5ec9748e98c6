"""The instance registry: every running toolwise sharing the database, with its heartbeat and what it
reports about itself (downstreams, circuits, policy)."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta
from typing import Any, Literal

from sqlalchemy import Connection, Select, delete, insert, or_, select, update

from toolwise.feedback.database import Database
from toolwise.feedback.records import InstanceStatus, utcnow
from toolwise.feedback.schema import InstanceRow

HEARTBEAT_S = 10.0  # how often a running instance refreshes its row in `instances` (`toolwise inspect status`)
STALE_AFTER_S = 3 * HEARTBEAT_S  # an instance silent this long is reported stale (killed, hung or cut off)
PRUNE_BATCH = 500  # ids per DELETE
KEEP_GONE = 50  # stopped or stale instances kept per namespace, the newest: `inspect status` shows 5 and counts them


class InstanceRegistry:
    """`FeedbackService.instances`: writes go through the database's write path."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def heartbeat(self, status: InstanceStatus) -> None:
        """Insert or refresh a running instance's row."""
        values = {c.key: getattr(status, c.key) for c in InstanceRow.__table__.columns if c.key != "id"}

        def write(conn: Connection) -> None:
            result = conn.execute(update(InstanceRow).where(InstanceRow.id == status.id).values(**values))
            if result.rowcount == 0:
                conn.execute(insert(InstanceRow).values(id=status.id, **values))

        await self._database.write(write)

    async def prune(self, namespace: str) -> int:
        """Delete the rows of `namespace`'s stopped or stale instances beyond the newest `KEEP_GONE` (each start
        leaves a row: one per session of a stdio client); every running instance's row stays. One cut off
        that comes back writes its row anew (`heartbeat`). Returns how many rows went."""
        alive_since = utcnow() - timedelta(seconds=STALE_AFTER_S)
        gone = or_(InstanceRow.stopped_at.is_not(None), InstanceRow.heartbeat_at < alive_since)
        older = (
            select(InstanceRow.id)
            .where(InstanceRow.namespace == namespace, gone)
            .order_by(InstanceRow.heartbeat_at.desc())
            .offset(KEEP_GONE)
        )

        def write(conn: Connection) -> int:
            ids = list(conn.execute(older).scalars())
            for start in range(0, len(ids), PRUNE_BATCH):  # bounded statements, whatever was left to grow
                conn.execute(delete(InstanceRow).where(InstanceRow.id.in_(ids[start : start + PRUNE_BATCH])))
            return len(ids)

        return await self._database.write(write)

    async def list(self, namespace: str | None = None, limit: int | None = None) -> builtins.list[InstanceStatus]:
        """Instances, the most recently heard from first (of one namespace, or all; the first `limit`)."""
        query = select(InstanceRow.__table__).order_by(InstanceRow.heartbeat_at.desc()).limit(limit)
        if namespace is not None:
            query = query.where(InstanceRow.namespace == namespace)
        return await self._read(query)

    async def get(self, instance_id: str, namespace: str) -> InstanceStatus | None:
        """One instance's row, or None: its one row, where `list` reads one per start ever made."""
        query = select(InstanceRow.__table__).where(InstanceRow.id == instance_id, InstanceRow.namespace == namespace)
        found = await self._read(query)
        return found[0] if found else None

    async def _read(self, query: Select[Any]) -> builtins.list[InstanceStatus]:
        async with self._database.engine.connect() as conn:
            result = await conn.execute(query)
            return [InstanceStatus(**{**row._mapping, "status": dict(row.status)}) for row in result]


def liveness(instance: InstanceStatus, now: datetime) -> tuple[Literal["alive", "stale", "stopped"], str]:
    """Whether an instance runs, as a word and in a phrase (`inspect status`, the dashboard): stopped,
    stale (no heartbeat for three intervals: killed, hung or cut off) or alive."""
    age = (now - instance.heartbeat_at).total_seconds()
    if instance.stopped_at:
        return "stopped", f"stopped {instance.stopped_at:%H:%M:%S}"
    if age > STALE_AFTER_S:
        return "stale", f"stale since {instance.heartbeat_at:%Y-%m-%d %H:%M:%S} (no heartbeat for {age:.0f}s)"
    return "alive", f"alive ({age:.0f}s ago)"
