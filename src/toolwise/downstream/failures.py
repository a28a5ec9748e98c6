"""What went wrong with a downstream, said the way a person fixing it needs to hear it, and the junk
it prints on stdout counted rather than logged line by line.

The SDK reports a failed start as "ExceptionGroup: unhandled errors in a TaskGroup" or a bare
`TimeoutError`; the facts are further down (the exception chain, the process's exit status). The
exit status of a stdio downstream comes from the process the SDK spawned, handed (by `sdk`'s spawn
hook, which `recording_spawns` installs) to whoever asked for it in the current context.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import mcp.client.stdio as sdk_stdio
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolwise import sdk
from toolwise.downstream.environment import command_line
from toolwise.feedback.arguments import names_secret

log = logging.getLogger(__name__)

JUNK_REPORT_EVERY_S = 30.0  # at most one log line per downstream this often about junk on its stdout
_SDK_PARSE_ERROR = "Failed to parse JSONRPC message from server"


class _Spawns(list[Any]):
    """The processes spawned in a `recording_spawns` block, and the event it sets at each."""

    def __init__(self, spawned: asyncio.Event | None) -> None:
        super().__init__()
        self.spawned = spawned


_spawned: ContextVar[_Spawns | None] = ContextVar("toolwise_spawned", default=None)


def _note_spawn(process: Any) -> None:
    holder = _spawned.get()
    if holder is not None:
        holder.append(process)
        if holder.spawned is not None:
            holder.spawned.set()


@contextlib.contextmanager
def recording_spawns(spawned: asyncio.Event | None = None) -> Iterator[list[Any]]:
    """Within this block (and tasks started in it), processes the SDK spawns are appended to the list
    (and `spawned` is set)."""
    sdk.install_spawn_hook(_note_spawn)
    holder = _Spawns(spawned)
    token = _spawned.set(holder)
    try:
        yield holder
    finally:
        _spawned.reset(token)


def exited(status: int) -> str:
    if status < 0:
        with contextlib.suppress(ValueError):
            return f"command was killed by {signal.Signals(-status).name}"
    return f"command exited with status {status}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The exception, the leaves of any group in it, and what each was raised from or during."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        else:
            yield current
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)


def describe(exc: BaseException, *, starting: bool, start_timeout_s: float, exit_status: int | None) -> str:
    """One line saying what happened: no answer in time, the process's exit, a refused connection, a
    missing command; else the innermost meaningful exception."""
    found = list(_chain(exc))
    if starting and any(isinstance(e, TimeoutError) for e in found):
        return f"no answer to initialize within {start_timeout_s:g}s (start_timeout_s)"
    gone = any(isinstance(e, MCPError) and e.code == CONNECTION_CLOSED for e in found)
    if exit_status is not None and (gone or not starting):  # else it was stopped by us, after the failure
        return exited(exit_status)
    for e in found:
        if isinstance(e, ConnectionRefusedError):
            return "connection refused"
        if isinstance(e, FileNotFoundError) and e.filename:
            return _not_found(str(e.filename))
        if isinstance(e, PermissionError) and e.filename:
            return f"command not executable: {e.filename}"
    if gone:
        return "closed the connection" + (" while starting" if starting else "")
    meaningful = [e for e in found if str(e) and not _is_cancellation(e)]
    leaf = meaningful[0] if meaningful else found[0] if found else exc
    return f"{type(leaf).__name__}: {leaf}" if str(leaf) else type(leaf).__name__


REFUSING = (401, 403)  # an HTTP downstream's answer that says toolwise lacks (or gives a wrong) token


def refusal(status_code: int, reason_phrase: str) -> str | None:
    """ "401 Unauthorized" for an HTTP answer that refuses toolwise (`REFUSING`); None for any other."""
    return f"{status_code} {reason_phrase}".strip() if status_code in REFUSING else None


def refused_why(headers: Mapping[str, str] | None) -> str:
    """Why an HTTP downstream refuses toolwise (401, 403): the token its headers give, or none given."""
    if any(names_secret(header) for header in headers or {}):
        return "it refused the token in its headers"
    return "it wants a token"


def _not_found(command: str) -> str:
    """A command not found; a whole command line written as "command" is said so, its arguments (a secret
    among them, perhaps) left out."""
    if words := command_line(command):
        return f'command not found: {words[0]!r} is written with its arguments in "command" (they go in "args")'
    return f"command not found: {command}"


def _is_cancellation(exc: BaseException) -> bool:
    return type(exc).__name__ in ("CancelledError", "WouldBlock") or isinstance(exc, KeyboardInterrupt)


class JunkReport:
    """Lines on a downstream's stdout that are not JSON-RPC: ignored (the connection is fine), the first
    logged with a sample, later ones counted and summed up in one line at most every `every_s` seconds."""

    def __init__(self, server: str, every_s: float = JUNK_REPORT_EVERY_S) -> None:
        self.server = server
        self.every_s = every_s
        self.total = 0
        self._unreported = 0
        self._latest = ""
        self._reported_at = 0.0
        self._summary: asyncio.TimerHandle | None = None

    def add(self, error: BaseException) -> None:
        self.total += 1
        self._latest = _line_of(error)
        if self.total == 1:
            self._reported_at = time.monotonic()
            log.warning("downstream %s printed a line on stdout that is not JSON-RPC (ignored): %s", *self._sample())
            return
        self._unreported += 1
        if self._summary is None:
            due = max(0.0, self.every_s - (time.monotonic() - self._reported_at))
            self._summary = asyncio.get_running_loop().call_later(due, self._report)

    def _sample(self) -> tuple[str, str]:
        return self.server, self._latest

    def _report(self) -> None:
        self._summary = None
        now = time.monotonic()
        log.warning(
            "downstream %s printed %d more lines on stdout that are not JSON-RPC in the last %.0fs (ignored, %d in "
            "all); the latest: %s",
            self.server,
            self._unreported,
            now - self._reported_at,
            self.total,
            self._latest,
        )
        self._reported_at, self._unreported = now, 0

    def close(self) -> None:
        """Say what is left to say now (the downstream stops)."""
        if self._summary is not None:
            self._summary.cancel()
            self._report()


def _line_of(error: BaseException) -> str:
    """The offending line itself when the parse error carries it (pydantic does), shortened."""
    if isinstance(error, ValidationError):
        found = [e.get("input") for e in error.errors()]
        if found and isinstance(found[0], str):
            return repr(found[0][:200])
    return str(error).replace("\n", " ")[:200]


class _WithoutParseTracebacks(logging.Filter):
    """The SDK logs a full traceback for every unparseable stdout line; `JunkReport` says it once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _SDK_PARSE_ERROR


logging.getLogger(sdk_stdio.__name__).addFilter(_WithoutParseTracebacks())


def untagged_reporter(server: str) -> Callable[[str], None]:
    """A log line for each answer of a downstream that negotiated 2026-07-28 but left out `resultType`."""

    def report(method: str) -> None:
        log.warning(
            "downstream %s negotiated %s but answered %s without resultType; its answers are read as complete",
            server,
            MODERN_PROTOCOL_VERSIONS[-1],
            method,
        )

    return report
