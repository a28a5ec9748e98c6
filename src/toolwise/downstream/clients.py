"""Which client a request comes from: the connection the SDK serves it on, never a shared default.

- Handshake era (2025-11-25), any transport: the SDK's `Connection` for that client (the
  streamable-HTTP session named by `Mcp-Session-Id`, or the stdio pipe).
- 2026-07-28 over a duplex stream (stdio, in-process): the pipe, which the SDK keeps as the
  connection's notify-only outbound channel (it builds a fresh `Connection` per request).
- 2026-07-28 over HTTP: nothing. Every request is a self-contained POST with no session and no
  channel, so it has no client identity beyond itself: `None`, and the caller treats the request
  as its own session unless the request names one.
"""

from __future__ import annotations

import uuid
import weakref
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise import sdk

_keys: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()  # forgotten with the connection


def connection_of(ctx: ServerRequestContext[Any]) -> Connection:
    """The SDK's per-client `Connection` behind a request (read from its session: `sdk`)."""
    return sdk.session_connection(ctx.session)


def client_key(ctx: ServerRequestContext[Any]) -> str | None:
    """A stable key for the client connection that sent `ctx`'s request; None when there is none
    (a 2026-07-28 HTTP request)."""
    connection = connection_of(ctx)
    if connection.session_id:
        return f"http-{connection.session_id}"
    if connection.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        channel: object = connection
    elif connection.has_standalone_channel:
        channel = connection.outbound
    else:
        return None
    key = _keys.get(channel)
    if key is None:
        key = _keys[channel] = f"conn-{uuid.uuid4()}"
    return key
