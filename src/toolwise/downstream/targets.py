"""What the SDK's `Client` connects to for a downstream of each kind: the in-process server, the URL (with
its configured headers on every request), or the stdio command with its environment (its stderr relayed
into toolwise's, named and masked: `stderr.py`).

An HTTP downstream that no longer knows the session of a handshake-era connection (it restarted, or ended
the session) answers 404 to it: the spec's sign to start a new session. The SDK's client passes on the
error body only ("Session not found": the status is lost by then), so the status is read on each response.

An answer that comes as a server-sent event (every handshake-era one; a 2026-07-28 one that streams) is one
event, which the SDK's client reads up to 1 MiB unless told otherwise: a larger result failed as a lost
connection and the downstream was reconnected to, where a stdio downstream's line has no such bound.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import MCP_SESSION_ID, streamable_http_client

from toolwise import sdk
from toolwise.config import HttpServer, InProcessServer, ServerSpec
from toolwise.downstream.environment import downstream_environment, resolve_command
from toolwise.downstream.failures import refusal
from toolwise.downstream.stderr import StderrRelay, given_secrets

if TYPE_CHECKING:
    import httpx2

MAX_EVENT = 1 << 28  # bytes: the largest answer read from an HTTP downstream (toolwise's own stdin takes as much)


def client_target(
    name: str,
    spec: ServerSpec,
    stack: contextlib.AsyncExitStack,
    session_lost: Callable[[], None] | None = None,
    refused: Callable[[str], None] | None = None,
) -> Any:
    """`name`: the server's, which its stderr lines carry; `session_lost`: called when an HTTP downstream
    answers 404 to the connection's session; `refused`: given the status ("401 Unauthorized") when it refuses
    a request for want of a token (the SDK's error does not say). What the target holds is released by `stack`."""
    if isinstance(spec, InProcessServer):
        return spec.server
    if isinstance(spec, HttpServer):
        # The configured headers (e.g. `Authorization: Bearer …`) go on every request; the
        # transport leaves closing a client it was given to us.
        http = sdk.http_client(headers=spec.headers or None)
        stack.push_async_callback(http.aclose)
        if session_lost is not None:
            http.event_hooks["response"].append(_watch_session(session_lost))
        if refused is not None:
            http.event_hooks["response"].append(_watch_refusal(refused))
        return streamable_http_client(spec.url, http_client=http, max_sse_event_size=MAX_EVENT)
    env = downstream_environment(spec.env)  # more than the SDK's minimum: downstream/environment.py
    params = StdioServerParameters(
        command=resolve_command(spec.command, env.get("PATH")), args=spec.args, env=env, cwd=spec.cwd
    )
    relay = StderrRelay(name, given_secrets(spec.env, spec.args))
    stack.push_async_callback(relay.aclose)  # pushed before the client enters the stack: after the process stopped
    return stdio_client(params, errlog=relay.errlog)


def _watch_refusal(refused: Callable[[str], None]) -> Callable[[httpx2.Response], Awaitable[None]]:
    async def on_response(response: httpx2.Response) -> None:
        if (status := refusal(response.status_code, response.reason_phrase)) is not None:
            refused(status)

    return on_response


def _watch_session(session_lost: Callable[[], None]) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A request's 404 says the session is gone; a GET stream's only once one was served on it: the stream is
    optional, and a server that takes POST alone may answer it 404 (an Express app's `app.post('/mcp')`) for
    a session it knows (the SDK's client then goes on without the stream). A DELETE is toolwise ending it."""
    streamed = False  # a GET stream was served on this session

    async def on_response(response: httpx2.Response) -> None:
        nonlocal streamed
        request = response.request
        if MCP_SESSION_ID not in request.headers:
            return
        if request.method == "GET":
            streamed = streamed or response.is_success
            if response.status_code == 404 and streamed:
                session_lost()
        elif request.method == "POST" and response.status_code == 404:
            session_lost()

    return on_response
