"""The snapshot tools (admin, off unless `snapshot_tools`): list, take and restore snapshots of the learned state."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from toolwise.feedback.records import SnapshotRecord
from toolwise.learning import snapshots as snapshot_files
from toolwise.learning.sessions import Session
from toolwise.server.own import Input, NoInput, Output, OwnTool
from toolwise.server.services import Services

# -- snapshots (admin, off unless `snapshot_tools`) ---------------------------------------------------


class SnapshotInfo(BaseModel):
    id: int | None
    version: str
    policy: str
    source: str
    created_at: str
    sample_count: int
    sha256: str
    signed: bool


def snapshot_info(record: SnapshotRecord) -> SnapshotInfo:
    return SnapshotInfo(
        id=record.id,
        version=record.version,
        policy=record.policy,
        source=record.source,
        created_at=record.created_at.isoformat(),
        sample_count=record.sample_count,
        sha256=record.sha256,
        signed=record.signature is not None,
    )


class SnapshotListOutput(Output):
    namespace: str
    current: int | None = Field(description="The snapshot the running state was loaded from or last saved as.")
    snapshots: list[SnapshotInfo]

    def text(self) -> str:
        lines = [f"{len(self.snapshots)} snapshots of {self.namespace!r} (current: {self.current})"]
        lines += [f"#{s.id} {s.created_at} {s.source} v{s.version} {s.sample_count} samples" for s in self.snapshots]
        return "\n".join(lines)


class SnapshotDumpInput(Input):
    output: str | None = Field(
        default=None, description="Also write it to this file, a name relative to the server's snapshot directory."
    )
    overwrite: bool = Field(default=False, description="Replace the file if it exists (refused otherwise).")


class SnapshotOutput(Output):
    snapshot: SnapshotInfo
    path: str | None = None

    def text(self) -> str:
        s = self.snapshot
        done = "read from" if s.source in ("restore", "rollback") else "written to"  # a restore reads its file
        where = f", {done} {self.path}" if self.path else ""
        return f"snapshot #{s.id} ({s.source}, {s.sample_count} samples, sha256 {s.sha256[:12]}…){where}"


class SnapshotRestoreInput(Input):
    snapshot_id: int | None = Field(default=None, description="A stored snapshot to restore (see snapshot_list).")
    input: str | None = Field(
        default=None, description="A snapshot file to restore, a name relative to the server's snapshot directory."
    )
    previous: bool = Field(default=False, description="Roll back to the snapshot before the current one.")


async def snapshot_list(services: Services, args: NoInput, session: Session) -> SnapshotListOutput:
    namespace = services.learning.namespace
    listed = await services.feedback.snapshots.list(namespace)
    return SnapshotListOutput(
        namespace=namespace,
        current=services.snapshots.snapshot_id,
        snapshots=[snapshot_info(r) for r in listed],
    )


async def snapshot_dump(services: Services, args: SnapshotDumpInput, session: Session) -> SnapshotOutput:
    path = snapshot_files.confined(services.settings.snapshot_dir, args.output) if args.output else None
    if path is not None and not args.overwrite:
        snapshot_files.refuse_existing(path)  # a refused file takes no snapshot (each rotates an older one out)
    record = await services.snapshots.save("manual")
    if path is not None:
        snapshot_files.write_file(record, path, overwrite=args.overwrite)
    return SnapshotOutput(snapshot=snapshot_info(record), path=args.output)


async def snapshot_restore(services: Services, args: SnapshotRestoreInput, session: Session) -> SnapshotOutput:
    directory = services.settings.snapshot_dir
    path = None if args.input is None else str(snapshot_files.confined(directory, args.input))
    record = await services.snapshots.choose(args.snapshot_id, path, args.previous)
    adopted = await services.snapshots.adopt(record, "rollback" if args.previous else "restore")
    return SnapshotOutput(snapshot=snapshot_info(adopted), path=args.input)


SNAPSHOT_TOOLS: list[OwnTool[Any, Any]] = [
    OwnTool(
        "snapshot_list",
        "Admin: the stored snapshots of the learned state, newest first.",
        NoInput,
        SnapshotListOutput,
        snapshot_list,
        True,
        admin=True,
    ),
    OwnTool(
        "snapshot_dump",
        "Admin: take a snapshot of the learned state now (stored; optionally also written to a file).",
        SnapshotDumpInput,
        SnapshotOutput,
        snapshot_dump,
        False,
        admin=True,
    ),
    OwnTool(
        "snapshot_restore",
        "Admin: replace the learned state by a stored snapshot, a snapshot file, or the previous "
        "snapshot (rollback). A wrong checksum, bad signature or other major version is refused.",
        SnapshotRestoreInput,
        SnapshotOutput,
        snapshot_restore,
        False,
        admin=True,
    ),
]
