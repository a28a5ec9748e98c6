"""The record of installs (`installs.json`, what `--undo` reads) and the backups of client configs: files
that may hold a server's secrets, so each is written private (0600) through a temporary file and a
rename. Backups live in toolwise's data dir, a folder per client config (keyed by its path), never beside
the file: a project's `.mcp.json` is often in a git repository, where a copy holding its secrets would
wait, untracked, to be committed. They are bounded: the newest `KEEP_BACKUPS` of each file are kept,
and any older one a recorded install still needs for `--undo`. `apply` and `undo` write a plan
(`install_plan.py`) through them: the backup first, then the files, then the record."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import platformdirs

from toolwise.cli.scopes import USER_SCOPE, Plan
from toolwise.feedback import utcnow
from toolwise.feedback.files import data_dir

KEEP_BACKUPS = 5  # backups kept per client config, besides those a recorded install needs for --undo
PRIVATE = 0o600  # files that may hold a server's secrets: owner read/write only


class InstallError(Exception):
    """Install or undo cannot go ahead; nothing was written. The message says what to fix."""


def config_dir() -> Path:
    """toolwise's folder under the user's config directory: the configs `install` writes."""
    return Path(platformdirs.user_config_dir("toolwise", appauthor=False))


def state_path() -> Path:
    return config_dir() / "installs.json"


def load_state() -> dict[str, list[dict[str, Any]]]:
    path = state_path()
    if not path.exists():
        return {}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InstallError(f"{path}: not valid JSON at line {exc.lineno} ({exc.msg})") from exc
    return state if isinstance(state, dict) else {}


def save_state(state: dict[str, list[dict[str, Any]]]) -> None:
    write_private(state_path(), json.dumps(state, indent=2) + "\n")


def recorded_as(state: dict[str, list[dict[str, Any]]], path: Path) -> str:
    """The key of the client config at `path` in installs.json: the file's real path (through symlinks),
    or the key an earlier install recorded that file under (the path it was given), so that an install
    through a link and an undo through its target (or the other way) find one record."""
    real = path.resolve()
    if str(real) in state:
        return str(real)
    return next((key for key in state if Path(key).resolve() == real), str(real))


def exact_text(path: Path) -> str:
    """A client config's text as it is on disk: its byte order mark and CRLF line ends kept (`read_text`
    would drop them), so that a backup written from it, and --undo, put back the same bytes."""
    with path.open(encoding="utf-8", newline="") as f:
        return f.read()


@contextlib.contextmanager
def one_at_a_time() -> Iterator[None]:
    """Holds installs.json's lock (a lock file beside it, locked by the OS: released when the process
    ends, however it ends): installs and undos at once, into two clients or one, each read installs.json
    and the client's file and write them back, so the one that wrote last would drop the other's record."""
    path = state_path().with_name("installs.json.lock")
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, PRIVATE)  # private as its neighbours, whatever the umask
    with open(fd, "a+b") as lock:
        found = os.fstat(fd)
        if os.name == "posix" and found.st_uid == os.getuid() and stat.S_IMODE(found.st_mode) != PRIVATE:
            os.fchmod(fd, PRIVATE)  # one an older toolwise made 0644
        if sys.platform == "win32":
            import msvcrt

            while True:  # LK_LOCK gives up after 10 s (EDEADLOCK): wait on, as flock does
                try:
                    msvcrt.locking(lock.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError as exc:
                    if exc.errno != errno.EDEADLOCK:
                        raise
        else:
            import fcntl

            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def written(text: str, record: dict[str, Any]) -> bool:
    """Whether `text` is what the install `record` wrote: byte for byte, or with CRLF read as LF (how
    installs recorded before configs were read exactly hashed what toolwise on Windows wrote)."""
    return record["written_sha256"] in (sha(text), sha(text.replace("\r\n", "\n")))


def write_private(path: Path, text: str, mode: int = PRIVATE) -> None:
    """Write through a temporary file (created with `mode`, never wider) and a rename: a crash leaves
    the old file or the new, never half. A symlink is written through: its target is replaced, the link stays."""
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # A name of its own: another install writing the same file at once (installs.json) must not take it away.
    tmp = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.toolwise-tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:  # the text's line ends, as they are
            if os.name == "posix":  # the umask may have narrowed `mode` (e.g. a 0644 file under umask 077)
                os.fchmod(fd, mode)
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def file_mode(path: Path) -> int | None:
    """The permission bits of `path` (through a symlink), or None when there is no file."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return None


def backups_dir(path: Path) -> Path:
    """The folder of the backups of the client config at `path`: named for the file and its path's hash,
    its real path (through symlinks): one folder for a file, whichever link it is reached by."""
    real = path.resolve()
    digest = hashlib.sha256(str(real).encode()).hexdigest()[:8]
    return data_dir() / "backups" / f"{real.name}-{digest}"


def backup(path: Path, text: str) -> Path:
    """A private (0600) copy of `text`, the config at `path`, in `backups_dir`, named with the time (UTC)."""
    stamp = utcnow().strftime("%Y%m%d-%H%M%S")
    folder, path = backups_dir(path), path.resolve()
    target = folder / f"{path.name}.toolwise-backup-{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = folder / f"{path.name}.toolwise-backup-{stamp}-{n}"
    write_private(target, text)
    return target


def prune_backups(path: Path, keep: int = KEEP_BACKUPS) -> list[Path]:
    """Delete the backups of `path` but the newest `keep` and those --undo can still restore; returns
    the deleted ones."""
    state = load_state()
    needed = restorable(state.get(recorded_as(state, path), []))
    folder, path = backups_dir(path), path.resolve()
    found = sorted(folder.glob(f"{path.name}.toolwise-backup-*"), key=lambda p: p.stat().st_mtime_ns)
    stale = [p for p in found[: max(len(found) - keep, 0)] if p not in needed]
    for old in stale:
        old.unlink()
    return stale


def restorable(history: list[dict[str, Any]]) -> set[Path]:
    """The backups `plan_undo` may restore verbatim: the newest install's, and each older one's while the
    newer backup is exactly what the older install wrote (an edit in between breaks the chain for good)."""
    needed: set[Path] = set()
    for i in range(len(history) - 1, -1, -1):
        needed.add(Path(history[i]["backup"]))
        try:
            text = exact_text(Path(history[i]["backup"]))
        except FileNotFoundError:
            break
        if i == 0 or not written(text, history[i - 1]):
            break
    return needed


def apply(plan: Plan, record: bool = True, mode: int | None = None) -> Path | None:
    """Write what the plan says (backup first); returns the backup, None when nothing changed. The
    client's file keeps its mode (or gets `mode`); the toolwise config is private."""
    if not plan.changed:
        return None
    folder = (plan.client_path.resolve() if plan.client_path.is_symlink() else plan.client_path).parent
    if not os.access(folder, os.W_OK):  # found before the backup and the toolwise config are written
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(plan.client_path))
    before_mode = file_mode(plan.client_path)
    saved = backup(plan.client_path, plan.client_before)
    for scope in plan.scopes:
        if scope.writes and scope.toolwise_after is not None:
            write_private(scope.toolwise_path, scope.toolwise_after)
    if plan.client_after != plan.client_before:
        write_private(plan.client_path, plan.client_after, mode if mode is not None else before_mode or PRIVATE)
    if record and plan.client_after != plan.client_before:
        state = load_state()
        state.setdefault(recorded_as(state, plan.client_path), []).append(
            {
                "backup": str(saved),
                "written_sha256": sha(plan.client_after),
                "moved": {
                    name: e for scope in plan.scopes if scope.where == USER_SCOPE for name, e in scope.moved.items()
                },
                "projects": {s.where: s.moved for s in plan.scopes if s.where != USER_SCOPE and s.moved},
                "mode": before_mode,
            }
        )
        save_state(state)
        prune_backups(plan.client_path)
    return saved


def undo(plan: Plan, used: int) -> Path | None:
    """Write the undo plan with the mode the file had before the first install it undoes (installs
    recorded before modes were: the file keeps its mode), and drop the records it consumed."""
    state = load_state()
    key = recorded_as(state, plan.client_path)
    history = state.get(key, [])
    mode = history[-used].get("mode") if used else None
    saved = apply(plan, record=False, mode=mode)
    records = history[: -used or None]
    if records:
        state[key] = records
    else:
        state.pop(key, None)
    save_state(state)
    prune_backups(plan.client_path)
    return saved
