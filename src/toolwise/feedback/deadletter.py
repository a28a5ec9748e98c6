"""Dead letters: records the database refused, kept one JSON line each in a file a person finds, and put
back with `toolwise import-dead-letters`.

A full data disk is when dead letters matter most, and when the file beside the database takes nothing
(a soak lost 36 answered calls that way: the write-ahead log grew back into the space freed). So space
is reserved for them in advance (`RESERVE_BYTES` in a file beside the dead-letter file, given back the
moment that file meets a full disk), and what still finds no room goes to a folder on another file
system ($XDG_RUNTIME_DIR, then the system's temp folder), named in an error. A record that no place
takes is logged whole by its caller, in the error that says why it was lost.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, insert

from toolwise.errors import UserError
from toolwise.feedback import toolstats
from toolwise.feedback.errors import DeadLetterError
from toolwise.feedback.files import PRIVATE_FILE, data_dir
from toolwise.feedback.rows import stored_ids
from toolwise.feedback.schema import ExecutionRow

log = logging.getLogger(__name__)

FILE_NAME = "toolwise-dead-letter.jsonl"
RESERVE_BYTES = 1 << 20  # room kept for dead letters on the data disk: about 1,500 records
_FULL = (errno.ENOSPC, errno.EDQUOT)
_DATES = ("started_at", "finished_at")
_COLUMNS = [c for c in ExecutionRow.__table__.columns if c.key != "seq"]


def dead_letter_file(database: Path | None) -> Path:
    """Where a database's dead letters go by default: beside its SQLite file, else in the data folder."""
    return (database.parent if database is not None else data_dir()) / FILE_NAME


def append_line(path: Path, data: bytes) -> None:
    """Append `data` (one line) to `path`, created 0600, whole or not at all: a write the disk cuts short
    is undone, so a reader never meets half a record."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        end = os.fstat(fd).st_size
        try:
            written = os.write(fd, data)
        except OSError:
            os.ftruncate(fd, end)
            raise
        if written != len(data):
            os.ftruncate(fd, end)
            raise OSError(errno.ENOSPC, "the disk took only part of the record", str(path))
    finally:
        os.close(fd)


def fallback_folders() -> list[Path]:
    """Where dead letters go when their own file's disk is full, in order: the user's runtime folder,
    then a folder of this user's own in the system's temp folder (both often another file system)."""
    folders = []
    if runtime := os.environ.get("XDG_RUNTIME_DIR"):
        folders.append(Path(runtime) / "toolwise")
    folders.append(Path(tempfile.gettempdir()) / f"toolwise-{os.getuid()}")
    return folders


def _private_folder(folder: Path) -> None:
    """Create `folder` 0700, or accept it only if it is a real folder of this user's that no one else
    can read (in a shared temp folder, someone else may have made it first)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise PermissionError(errno.EACCES, "not a private folder of this user's", str(folder))


class DeadLetters:
    """The dead-letter file, its reserved space, and the places it falls back to."""

    def __init__(self, path: Path, fallbacks: Sequence[Path] | None = None) -> None:
        self.path = path
        self.reserve_path = path.with_name(path.name + ".reserve")
        digest = hashlib.sha256(str(path.absolute()).encode()).hexdigest()[:8]
        name = f"{path.stem}-{digest}{path.suffix}"  # which database's dead letters, when several share a folder
        self.fallbacks = [folder / name for folder in (fallback_folders() if fallbacks is None else fallbacks)]
        self._told: set[Path] = set()  # fallback files already explained in an error

    def reserve(self) -> None:
        """Keep `RESERVE_BYTES` for dead letters on their disk (blocking: run it on a thread). A disk too
        full even for that is warned about, not fatal."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.reserve_path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
            try:
                if os.fstat(fd).st_size < RESERVE_BYTES:
                    _allocate(fd, RESERVE_BYTES)
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("no space reserved for dead letters at %s: %s", self.reserve_path, exc.strerror or exc)

    def write(self, line: str) -> Path:
        """Append one record where it fits: its own file (after giving back the reserve, on a full
        disk), else a fallback. Returns where it went; `DeadLetterError` names every place that refused."""
        data = (line + "\n").encode()
        refused: list[str] = []
        for where in [self.path, *self.fallbacks]:
            try:
                self._append(where, data)
            except OSError as exc:
                refused.append(f"{where}: {exc.strerror or exc}")
                continue
            if where != self.path and where not in self._told:
                self._told.add(where)
                log.error(
                    "dead letters cannot be written to %s (%s); they go to %s instead (it may not outlive a "
                    "reboot): once the disk has room, run `toolwise import-dead-letters %s`",
                    self.path,
                    refused[0],
                    where,
                    where,
                )
            return where
        raise DeadLetterError("no dead-letter file took it: " + "; ".join(refused))

    def _append(self, where: Path, data: bytes) -> None:
        if where != self.path:
            _private_folder(where.parent)
            append_line(where, data)
            return
        where.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            append_line(where, data)
        except OSError as exc:
            if exc.errno not in _FULL or not self._release():
                raise
            append_line(where, data)  # the reserve's room, unless the database took it first

    def _release(self) -> bool:
        """Give the reserved space back to the disk, for the dead-letter file; False if none was left."""
        try:
            if self.reserve_path.stat().st_size == 0:
                return False
            os.truncate(self.reserve_path, 0)
        except FileNotFoundError:
            return False
        log.error("the disk of %s is full: its reserved space is given back to take dead letters", self.path)
        return True


def _allocate(fd: int, size: int) -> None:
    """Blocks for `size` bytes, really taken on disk (zeros where fallocate is missing, as on macOS)."""
    if hasattr(os, "posix_fallocate"):
        os.posix_fallocate(fd, 0, size)
        return
    os.ftruncate(fd, 0)
    os.write(fd, bytes(size))


def read_dead_letters(path: Path) -> Iterator[dict[str, Any]]:
    """The execution rows of a dead-letter file, as stored (dates parsed). A line that is not one (another
    file given by mistake) is the caller's to fix: a UserError naming it."""
    with path.open("rb") as lines:  # bytes: a line that is not UTF-8 is refused with its number too
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                row = _complete(dict(json.loads(line)["execution"]))
                for key in _DATES:
                    row[key] = datetime.fromisoformat(row[key])
            except (ValueError, KeyError, TypeError) as exc:
                raise UserError(f"{path}, line {number}: not a dead letter of toolwise ({exc})") from exc
            yield row


def _complete(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row with every column: one a toolwise of another version did not write is empty (or its
    default); a column the log cannot do without, missing, is a ValueError naming it."""
    missing = [c.key for c in _COLUMNS if c.key not in row and not c.nullable and c.default is None]
    if missing:
        raise ValueError(f"no {', '.join(missing)}")
    defaults = {c.key: getattr(c.default, "arg", None) for c in _COLUMNS}
    return {**{key: value for key, value in defaults.items() if key not in row}, **row}


def import_rows(conn: Connection, rows: list[dict[str, Any]]) -> int:
    """Insert the executions of `rows` not in the log yet, with their tools' summaries; how many."""
    ids = [row["id"] for row in rows]
    known = stored_ids(conn, ids)
    new = list({row["id"]: row for row in rows if row["id"] not in known}.values())
    if not new:
        return 0
    conn.execute(insert(ExecutionRow), new)
    summary = [
        (r["namespace"], r["tool"], r["success"], r["latency_ms"], r["finished_at"], r["reward"], r["explored"])
        for r in new
    ]
    toolstats.apply(conn, toolstats.deltas(summary))
    return len(new)
