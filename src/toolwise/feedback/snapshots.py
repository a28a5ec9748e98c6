"""The snapshot store: learner snapshots, kept per namespace, newest `keep` at most."""

from __future__ import annotations

import builtins

from sqlalchemy import Connection, delete, insert, select

from toolwise.feedback.database import Database
from toolwise.feedback.records import SnapshotRecord
from toolwise.feedback.schema import SnapshotRow


class SnapshotStore:
    """`FeedbackService.snapshots`: writes go through the database's write path."""

    def __init__(self, database: Database) -> None:
        self._database = database

    async def save(self, snapshot: SnapshotRecord, *, keep: int) -> int:
        """Store a snapshot and drop all but the newest `keep` of its namespace; returns its id."""
        if keep < 1:
            raise ValueError(f"keep must be ≥ 1, got {keep}")
        values = {c.key: getattr(snapshot, c.key) for c in SnapshotRow.__table__.columns if c.key != "id"}
        kept = (
            select(SnapshotRow.id)
            .where(SnapshotRow.namespace == snapshot.namespace)
            .order_by(SnapshotRow.id.desc())
            .limit(keep)
        )

        def write(conn: Connection) -> int:
            # Values bound at execution, not in the statement: SQLAlchemy's statement cache keeps the first
            # statement it compiled, and with it a payload (tens of MB) for as long as the process runs.
            snapshot_id = conn.execute(insert(SnapshotRow).returning(SnapshotRow.id), values).scalar_one()
            conn.execute(
                delete(SnapshotRow).where(SnapshotRow.namespace == snapshot.namespace, SnapshotRow.id.not_in(kept))
            )
            return snapshot_id

        return await self._database.write(write)

    async def list(self, namespace: str = "default") -> builtins.list[SnapshotRecord]:
        """Stored snapshots of a namespace, newest first, without their payloads."""
        columns = [c for c in SnapshotRow.__table__.columns if c.key != "payload"]
        async with self._database.engine.connect() as conn:
            result = await conn.execute(
                select(*columns).where(SnapshotRow.namespace == namespace).order_by(SnapshotRow.id.desc())
            )
            return [SnapshotRecord(**row._mapping) for row in result]

    async def get(self, snapshot_id: int | None = None, *, namespace: str = "default") -> SnapshotRecord | None:
        """One snapshot with its payload: by id, or the newest of the namespace."""
        query = select(SnapshotRow.__table__).where(SnapshotRow.namespace == namespace)
        query = query.where(SnapshotRow.id == snapshot_id) if snapshot_id is not None else query
        async with self._database.engine.connect() as conn:
            row = (await conn.execute(query.order_by(SnapshotRow.id.desc()).limit(1))).first()
        return None if row is None else SnapshotRecord(**row._mapping)
