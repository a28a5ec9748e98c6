"""Is the SQLite file sound? Checked once after start, beside the work, never in its way.

`PRAGMA quick_check` reads every page of the file (minutes on a year of history), so start-up does not
wait for it: a few seconds after start it runs on a thread of its own, at the lowest CPU priority where
the thread alone can be given one (Linux), on a read-only connection (WAL: it holds up no writer), and
is interrupted at shutdown. What it finds is logged as an error naming the file and its first problems,
and stays in the store's health (`get_learning_stats`, `inspect status`, the dashboard). `toolwise
doctor` runs the full `integrity_check` (indexes against their tables too) and waits for it.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
import threading
from pathlib import Path

log = logging.getLogger(__name__)

MAX_PROBLEMS = 10  # the check stops after this many: enough to say what is wrong, bounded however bad
CHECK_AFTER_S = 5.0  # after start: the start-up's own reads (replay, sync) go first
_SHOWN = 3  # problems named in the store's health


def check_file(path: Path, *, full: bool = False) -> list[str]:
    """The problems `quick_check` (`integrity_check` with `full`) finds in the file, at most
    MAX_PROBLEMS; [] when it is sound. Blocking: run it on a thread."""
    conn = _connect(path)
    try:
        return _problems(conn, full=full)
    finally:
        conn.close()


def recovery(path: Path) -> str:
    """What to do with a damaged file."""
    return (
        f"stop toolwise, copy what can be read with `sqlite3 {path} .recover | sqlite3 NEW.db` (or restore a "
        "backup) and use that file"
    )


def _connect(path: Path) -> sqlite3.Connection:
    """A read-only connection: a check never writes, nor creates a missing file."""
    return sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, check_same_thread=False)


def _problems(conn: sqlite3.Connection, *, full: bool) -> list[str]:
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = conn.execute(f"PRAGMA {pragma}({MAX_PROBLEMS})").fetchall()
    except sqlite3.OperationalError:
        raise  # could not check (interrupted, locked, unreadable): not a finding about the file
    except sqlite3.DatabaseError as exc:  # corrupt beyond what the check walks (a damaged schema page)
        return [str(exc)]
    lines = [line for (text,) in rows for line in str(text).splitlines()]
    found = [line for line in lines if line != "ok" and not line.startswith("*** in database")]
    return found[:MAX_PROBLEMS]


class IntegrityCheck:
    """The background check of one SQLite file and what it found (`problems`: None until it has run)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] | None = None
        self._conn: sqlite3.Connection | None = None
        self._stopped = False
        self._lock = threading.Lock()  # between the checking thread and `stop`

    @property
    def damaged(self) -> str | None:
        """The file and its first problems, in words; None while nothing was found."""
        if not self.problems:
            return None
        more = f" (and {len(self.problems) - _SHOWN} more)" if len(self.problems) > _SHOWN else ""
        return f"{self.path} is damaged: {'; '.join(self.problems[:_SHOWN])}{more}"

    def run(self) -> None:
        """Check the file once (blocking: on a thread of its own), and log what was found."""
        if sys.platform == "linux":  # there a thread has a priority of its own; elsewhere this is the process's
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        try:
            with self._lock:
                if self._stopped:
                    return
                conn = self._conn = _connect(self.path)
            try:
                self.problems = _problems(conn, full=False)
            finally:
                with self._lock:
                    self._conn = None
                conn.close()
        except sqlite3.OperationalError as exc:
            if not self._stopped:
                log.warning("the integrity check of %s could not run: %s", self.path, exc)
            return
        if self.problems:
            log.error(
                "%s: PRAGMA quick_check found %d problem(s): %s. What it holds may be lost or wrong: %s; "
                "`toolwise doctor` runs the full check",
                self.path,
                len(self.problems),
                "; ".join(self.problems),
                recovery(self.path),
            )
        else:
            log.info("integrity check of %s: ok", self.path)

    def stop(self) -> None:
        """Interrupt a check under way (shutdown); one not started yet will not start."""
        with self._lock:
            self._stopped = True
            if self._conn is not None:
                self._conn.interrupt()
