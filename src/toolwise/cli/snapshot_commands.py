"""`toolwise snapshot …`: dump, restore and list snapshots of the learned state, and sign them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from toolwise.cli.common import (
    EXIT_FOUND,
    ConfigOption,
    DatabaseUrlOption,
    fail,
    output_or_exit,
    settings_or_exit,
    writing,
)
from toolwise.cli.database import current, run
from toolwise.config import Settings

if TYPE_CHECKING:
    from toolwise.feedback import FeedbackService

snapshot_app = typer.Typer(help="Dump, restore and list snapshots of the learned state.", no_args_is_help=True)


@snapshot_app.command("dump")
def snapshot_dump(
    output: Annotated[Path, typer.Option("--output", "-o", help="Snapshot file to write.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    snapshot_id: Annotated[
        int | None, typer.Option("--id", help="A stored snapshot (default: the current state).")
    ] = None,
    sign_key: Annotated[Path | None, typer.Option(help="Ed25519 private key (PEM): write OUTPUT.sig.")] = None,
) -> None:
    """Write a snapshot file: the state as of now (newest snapshot + the log after it), or a stored one."""
    from toolwise.cli.console import console_beside
    from toolwise.learning import snapshots  # the learned state's files: when the command runs

    output_or_exit(output, makes_folder=True)  # `write_file` makes the folder it goes in
    report = console_beside(output)

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        if snapshot_id is None:
            record = (await current(settings, feedback)).snapshots.snapshot("manual")
        else:
            found = await feedback.snapshots.get(snapshot_id, namespace=settings.namespace)
            if found is None:
                raise snapshots.SnapshotError(f"no snapshot {snapshot_id} in namespace {settings.namespace!r}")
            record = found
        if sign_key is not None:
            record = snapshots.sign(record, snapshots.load_private_key(sign_key))
        with writing(output):
            snapshots.write_file(record, output)
        signed = f", signature in {snapshots.signature_path(output)}" if record.signature else ""
        report.print(
            f"wrote {output}: version {record.version}, policy {record.policy}, {record.sample_count} samples, "
            f"sha256 {record.sha256}{signed}"
        )

    run(config, work, database_url, output=output)


@snapshot_app.command("restore")
def snapshot_restore(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    input_path: Annotated[Path | None, typer.Option("--input", "-i", help="Snapshot file to restore.")] = None,
    previous: Annotated[
        bool, typer.Option("--previous", help="Roll back to the snapshot before the current one.")
    ] = False,
    snapshot_id: Annotated[int | None, typer.Option("--id", help="A stored snapshot to restore.")] = None,
    verify_key: Annotated[
        Path | None, typer.Option(help="Ed25519 public key (PEM): the signature must verify.")
    ] = None,
) -> None:
    """Make a snapshot the learned state (running instances adopt it at their next sync).

    A wrong checksum, a bad signature or another major version is refused and nothing changes."""
    from toolwise.cli.console import console

    if sum((snapshot_id is not None, input_path is not None, previous)) != 1:  # before a database is opened
        fail(
            "name the one snapshot to restore: --id N (`toolwise snapshot list` shows them), --input FILE or --previous"
        )
    if input_path is not None:  # the key it is verified with: --verify-key's, else the config's
        _check_file(input_path, verify_key or settings_or_exit(config, database_url).snapshot_verify_key)

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        if verify_key is not None:
            settings = settings.model_copy(update={"snapshot_verify_key": verify_key})
        from toolwise.server.services import Services

        restoring = Services.open(settings, feedback).snapshots
        path = str(input_path) if input_path is not None else None
        record = await restoring.choose(snapshot_id, path, previous)
        adopted = await restoring.adopt(record, "rollback" if previous else "restore")
        console.print(
            f"restored snapshot as #{adopted.id} ({adopted.source}): version {adopted.version}, "
            f"{adopted.sample_count} samples, sha256 {adopted.sha256[:16]}…"
        )

    run(config, work, database_url, create=input_path is not None)  # a file may seed a new database


def _check_file(path: Path, verify_key: Path | None) -> None:
    """The snapshot file (and key) of a restore, read and verified before its database is opened: a file
    that may seed a new database must be one, or nothing is created. Missing, unreadable or no snapshot:
    one line, exit 2 (as a config that cannot be read); a snapshot refused (checksum, signature, major
    version): exit 1, as a refused restore always was. The restore reads it again from the file."""
    from toolwise.learning import snapshots  # the learned state's files: when the command runs

    try:
        record = snapshots.read_file(path)
        key = snapshots.load_public_key(verify_key) if verify_key is not None else None
    except snapshots.SnapshotError as exc:
        fail(str(exc), exc)
    try:
        snapshots.verify(record, key)
    except snapshots.SnapshotError as exc:
        fail(f"{path}: {exc}", exc, code=EXIT_FOUND)


@snapshot_app.command("list")
def snapshot_list(config: ConfigOption = None, database_url: DatabaseUrlOption = None) -> None:
    """The stored snapshots, newest first."""
    from rich.table import Table

    from toolwise.cli.console import console

    async def work(settings: Settings, feedback: FeedbackService) -> None:
        table = Table("id")
        table.add_column("created", min_width=10)  # squeezed, the date stays whole and the time wraps below it
        for header in ("source", "version", "policy", "samples", "sha256", "signed"):
            table.add_column(header)
        for r in await feedback.snapshots.list(settings.namespace):
            table.add_row(
                str(r.id),
                f"{r.created_at:%Y-%m-%d %H:%M:%S}",
                r.source,
                r.version,
                r.policy,
                str(r.sample_count),
                r.sha256[:8],  # as many as `git log --oneline` shows: enough to tell them apart
                "yes" if r.signature else "no",
            )
        console.print(table)

    run(config, work, database_url)


@snapshot_app.command("keygen")
def snapshot_keygen(
    private: Annotated[Path, typer.Option(help="Where to write the private key (PEM, mode 600).")],
    public: Annotated[Path, typer.Option(help="Where to write the public key (PEM).")],
    force: Annotated[bool, typer.Option("--force", help="Replace existing key files.")] = False,
) -> None:
    """A new Ed25519 key pair for signing snapshots (existing key files are kept unless --force)."""
    from toolwise.cli.console import console
    from toolwise.learning import snapshots  # the learned state's files: when the command runs

    for path in (private, public):  # both writable, or neither is written
        output_or_exit(path)
    if private.resolve() == public.resolve():  # the public key would be written over the private one
        fail(f"--private and --public name one file ({private}): name two")
    try:
        snapshots.generate_keys(private, public, force=force)
    except snapshots.SnapshotError as exc:
        fail(str(exc), exc, code=1)
    console.print(f"wrote {private} and {public}")
