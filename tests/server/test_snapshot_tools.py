"""The snapshot MCP tools touch only the snapshot directory, and key generation keeps existing keys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolwise.cli.main import app as cli
from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.learning import snapshots
from toolwise.learning.sessions import Session
from toolwise.server.services import Services
from toolwise.server.snapshot_tools import SnapshotDumpInput, SnapshotOutput, SnapshotRestoreInput
from toolwise.server.tools import own_tools


@pytest.fixture
async def services(tmp_path: Path) -> AsyncIterator[Services]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    settings = Settings(database_url=url, seed=1, sync_interval_s=0, snapshot_dir=tmp_path / "snapshots")
    async with FeedbackService(url, flush_interval_ms=1) as feedback:
        yield Services.open(settings, feedback)


async def test_snapshot_tools_read_and_write_only_inside_the_snapshot_directory(
    services: Services, tmp_path: Path
) -> None:
    tools = own_tools(admin=True, snapshots=True)
    session = Session("admin")

    async def dump(args: SnapshotDumpInput, _: None) -> SnapshotOutput:
        answer = await tools["snapshot_dump"].handler(services, args, session)
        assert isinstance(answer, SnapshotOutput)
        return answer

    async def restore(args: SnapshotRestoreInput, _: None) -> SnapshotOutput:
        answer = await tools["snapshot_restore"].handler(services, args, session)
        assert isinstance(answer, SnapshotOutput)
        return answer

    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    for name in (str(outside), "../precious.txt", "a/../../precious.txt"):
        with pytest.raises(snapshots.SnapshotError, match="snapshot directory"):
            await dump(SnapshotDumpInput(output=name, overwrite=True), None)
    assert outside.read_text() == "keep me"
    (tmp_path / "snapshots").mkdir()
    (tmp_path / "snapshots" / "link").symlink_to(outside)
    with pytest.raises(snapshots.SnapshotError, match="inside the snapshot directory"):
        await dump(SnapshotDumpInput(output="link", overwrite=True), None)
    assert outside.read_text() == "keep me"

    # A file outside that exists and one that does not get the same answer: nothing is revealed.
    answers = []
    for name in ("/etc/passwd", "/no/such/file", "../precious.txt"):
        with pytest.raises(snapshots.SnapshotError) as refused:
            await restore(SnapshotRestoreInput(input=name), None)
        answers.append(str(refused.value).replace(repr(name), "NAME"))
    assert len(set(answers)) == 1 and "no such file" not in answers[0]

    await dump(SnapshotDumpInput(output="state.snapshot"), None)
    written = tmp_path / "snapshots" / "state.snapshot"
    before = written.read_bytes()
    with pytest.raises(snapshots.SnapshotError, match="already exists"):
        await dump(SnapshotDumpInput(output="state.snapshot"), None)
    assert written.read_bytes() == before
    await dump(SnapshotDumpInput(output="state.snapshot", overwrite=True), None)
    restored = await restore(SnapshotRestoreInput(input="state.snapshot"), None)
    assert restored.path == "state.snapshot"


async def test_stored_snapshot_files_are_readable_by_their_owner_alone(services: Services, tmp_path: Path) -> None:
    """A snapshot holds what users asked for (the learned state, argument digests): 0600 in a 0700 folder."""
    dump = own_tools(admin=True, snapshots=True)["snapshot_dump"]
    await dump.handler(services, SnapshotDumpInput(output="new.snapshot"), Session("admin"))
    older = tmp_path / "snapshots" / "older.snapshot"
    older.write_bytes(b"an older file")
    older.chmod(0o644)
    await dump.handler(services, SnapshotDumpInput(output="older.snapshot", overwrite=True), Session("admin"))
    assert (tmp_path / "snapshots").stat().st_mode & 0o777 == 0o700
    for written in (tmp_path / "snapshots" / "new.snapshot", older):
        assert written.stat().st_mode & 0o777 == 0o600, f"{written.name}: {oct(written.stat().st_mode)}"


def test_a_dumped_snapshot_and_its_signature_are_readable_by_their_owner_alone(tmp_path: Path) -> None:
    (tmp_path / "toolwise.db").touch()  # a database that exists: the read-only commands refuse a missing one
    url = f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"
    key = ["--private", str(tmp_path / "k.pem"), "--public", str(tmp_path / "k.pub")]
    assert CliRunner().invoke(cli, ["snapshot", "keygen", *key]).exit_code == 0
    out = tmp_path / "state.snapshot"
    dump = ["snapshot", "dump", "--database-url", url, "--output", str(out), "--sign-key", str(tmp_path / "k.pem")]
    result = CliRunner().invoke(cli, dump)
    assert result.exit_code == 0, result.output
    for written in (out, snapshots.signature_path(out)):
        assert written.stat().st_mode & 0o777 == 0o600, f"{written.name}: {oct(written.stat().st_mode)}"


def test_keygen_keeps_an_existing_key_unless_forced(tmp_path: Path) -> None:
    private, public = tmp_path / "key.pem", tmp_path / "key.pub"
    args = ["snapshot", "keygen", "--private", str(private), "--public", str(public)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    assert private.stat().st_mode & 0o777 == 0o600
    key = private.read_bytes()
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 1 and "--force" in again.output
    assert private.read_bytes() == key
    assert CliRunner().invoke(cli, [*args, "--force"]).exit_code == 0
    assert private.read_bytes() != key and private.stat().st_mode & 0o777 == 0o600


def test_keygen_refusing_names_the_files_that_exist_in_plain_words(tmp_path: Path) -> None:
    """It said `… already exist(s)` whether one file or both were there."""
    private, public = tmp_path / "key.pem", tmp_path / "key.pub"
    args = ["snapshot", "keygen", "--private", str(private), "--public", str(public)]
    assert CliRunner().invoke(cli, args).exit_code == 0
    both = " ".join(CliRunner().invoke(cli, args).output.split())
    assert f"{private} and {public} already exist;" in both, both
    public.unlink()
    one = " ".join(CliRunner().invoke(cli, args).output.split())
    assert f"{private} already exists;" in one, one


async def test_a_restore_from_a_file_says_it_read_the_file_not_that_it_wrote_it(services: Services) -> None:
    tools, session = own_tools(admin=True, snapshots=True), Session("admin")
    dumped = await tools["snapshot_dump"].handler(services, SnapshotDumpInput(output="state.snapshot"), session)
    restored = await tools["snapshot_restore"].handler(services, SnapshotRestoreInput(input="state.snapshot"), session)
    assert dumped.text().endswith("written to state.snapshot")
    assert restored.text().endswith("read from state.snapshot")


async def test_a_refused_dump_stores_no_snapshot(services: Services, tmp_path: Path) -> None:
    """A dump refused for its file (outside the directory, already there) leaves the stored snapshots as
    they were: stored first, each refusal added one, and the rotation (keep_snapshots) dropped an older one."""
    dump, session = own_tools(admin=True, snapshots=True)["snapshot_dump"], Session("admin")
    await dump.handler(services, SnapshotDumpInput(output="state.snapshot"), session)
    before = await services.feedback.snapshots.list(services.learning.namespace)
    for refused in ("state.snapshot", "../outside.snapshot"):
        with pytest.raises(snapshots.SnapshotError):
            await dump.handler(services, SnapshotDumpInput(output=refused), session)
    after = await services.feedback.snapshots.list(services.learning.namespace)
    assert [s.id for s in after] == [s.id for s in before]


async def test_a_snapshot_file_name_cut_mid_character_is_refused_naming_it(services: Services) -> None:
    """Half a surrogate pair is no file name the system takes: both tools raised UnicodeEncodeError (answered
    'Error executing tool …' with a traceback in the log)."""
    tools, session = own_tools(admin=True, snapshots=True), Session("admin")
    with pytest.raises(snapshots.SnapshotError, match="not a file name"):
        await tools["snapshot_dump"].handler(services, SnapshotDumpInput(output="state\ud83d"), session)
    with pytest.raises(snapshots.SnapshotError, match="not a file name"):
        await tools["snapshot_restore"].handler(services, SnapshotRestoreInput(input="state\ud83d"), session)
