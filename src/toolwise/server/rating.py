"""Which call `submit_feedback(tool=…)` rates when it is given no execution id.

A session is the client connection unless an agent names one, and many clients open a connection per
request: the README's HTTP snippet (one `async with` per step), the Inspector CLI (one process per
call), 2026-07-28 HTTP (every request its own session). Looking only in the caller's session, their
rating of the call they just made found nothing. So a call is looked for

1. in the session the rating names (`session_id`): only there;
2. else in the caller's own session (its connection);
3. else in the log: the newest call of the tool by the caller's client (its principal: the stdio
   server's one client owns every call) that finished in the last `RATE_BY_NAME_WINDOW_S`, by this
   instance or by one that has stopped, unless it belongs to a session still open on this instance
   (another conversation) or was made by another instance still running. Those cases, and finding
   nothing, are errors that say what to pass instead. Another client's calls are never looked at.
"""

from __future__ import annotations

from datetime import timedelta

from toolwise.feedback import Execution, utcnow
from toolwise.feedback.instances import liveness
from toolwise.learning.agent import NothingToRateError
from toolwise.learning.sessions import Session
from toolwise.server.services import Services

RATE_BY_NAME_WINDOW_S = 600.0  # how far back a rating by tool name looks beyond the caller's session
BY_ID = "pass execution_id (the call's _meta['toolwise/execution_id'])"


async def call_to_rate(services: Services, session: Session, tool: str, *, named: bool) -> tuple[str, Session]:
    """The execution id a rating of `tool` is for, and the session to learn the rating in (its own
    session while this instance holds it, else the caller's). `named`: the caller named `session`."""
    call = session.latest(tool)
    if call is not None:
        return call.id, session
    if named:
        raise NothingToRateError(
            f"no call of {tool!r} in session {session.name!r} (its last {session.window} calls): {BY_ID}, "
            "or leave session_id out to rate the newest call of the tool"
        )
    minutes = f"{RATE_BY_NAME_WINDOW_S / 60:g} minutes"
    since = utcnow() - timedelta(seconds=RATE_BY_NAME_WINDOW_S)
    namespace = services.learning.namespace
    newest = await services.feedback.reads.latest_of(tool, since=since, namespace=namespace, owner=session.owner)
    if newest is None:
        raise NothingToRateError(f"no call of {tool!r} in this session or in the last {minutes}: {BY_ID}")
    if newest.instance == services.learning.instance_id:
        if services.learning.sessions.find(newest.session_id) is not None:
            raise NothingToRateError(
                f"the newest call of {tool!r} ({_ago(newest)}) belongs to another of this client's sessions, "
                f"still open: {BY_ID}, or that session's session_id"
            )
        return newest.id, session
    if await _running(services, newest.instance):
        raise NothingToRateError(
            f"the newest call of {tool!r} ({_ago(newest)}) was made through another toolwise instance, "
            f"still running: {BY_ID}"
        )
    return newest.id, session


def _ago(execution: Execution) -> str:
    return f"{(utcnow() - execution.finished_at).total_seconds():.0f} s ago"


async def _running(services: Services, instance: str | None) -> bool:
    """Whether another instance is still serving (heartbeat recent, not stopped)."""
    if instance is None:
        return False
    found = await services.feedback.instances.get(instance, services.learning.namespace)
    return found is not None and liveness(found, utcnow())[0] == "alive"
