"""Where toolwise keeps its files, and files created readable by their owner alone. Nothing here opens a
database: the CLI and the config (every command's start) read these without importing SQLAlchemy."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

import platformdirs

PRIVATE_FILE = 0o600  # what holds users' history: owner read/write only


def data_dir() -> Path:
    """toolwise's folder under the user's data directory. Not created here (a default is computed for
    every config, even one that names another database): what writes there creates it, 0700."""
    return Path(platformdirs.user_data_dir("toolwise", appauthor=False))


def create_private(path: Path) -> None:
    """Create `path` empty with mode 0600 if it does not exist: the execution log holds what users
    asked for. SQLite gives its -wal and -shm files the database file's mode."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    except FileExistsError:
        return


def open_private(path: Path, *, exclusive: bool = False) -> BinaryIO:
    """`path` opened for writing from empty, readable by its owner alone: a new file is created 0600 (never
    wider, whatever the umask) and an existing regular file of ours is narrowed to 0600, for files that hold
    what users asked for (exports, snapshots). `exclusive`: an existing file raises FileExistsError instead."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC), PRIVATE_FILE)
    try:
        found = os.fstat(fd)
        # not a device or pipe (`-o /dev/stdout`), nor another user's file we may write but not chmod
        if stat.S_ISREG(found.st_mode) and found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) != PRIVATE_FILE:
            os.fchmod(fd, PRIVATE_FILE)
        return os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise


def default_database_url() -> str:
    """`TOOLWISE_DATABASE_URL` when set, else an SQLite file in `data_dir()`."""
    return os.environ.get("TOOLWISE_DATABASE_URL") or f"sqlite+aiosqlite:///{data_dir() / 'toolwise.db'}"
