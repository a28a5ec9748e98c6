"""Who calls through toolwise, and what belongs to each call in flight on a downstream.

Which client a request comes from: the connection the SDK serves it on, never a shared default.
- Handshake era (2025-11-25), any transport: the SDK's `Connection` for that client (the
  streamable-HTTP session named by `Mcp-Session-Id`, or the stdio pipe).
- 2026-07-28 over a duplex stream (stdio, in-process): the pipe, which the SDK keeps as the
  connection's notify-only outbound channel (it builds a fresh `Connection` per request).
- 2026-07-28 over HTTP: nothing. Every request is a self-contained POST with no session and no
  channel, so it has no connection beyond itself: `None`, and the caller treats the request as its
  own session unless the request names one.

Whom a request acts for (`Callers.principal`), which owns the calls, sessions, ratings and argument
values it leaves: its connection when it has one (unguessable: the SDK's random `Mcp-Session-Id`, or a
random key of ours for a pipe); over 2026-07-28 HTTP, where it has none, the bearer token it sent (one
client per token: `http_token_file` may hold one for each), else the one anonymous client a tokenless
loopback server has. A stdio server has one client, which owns everything (`serve_alone`).

- A call's `_meta` goes to the downstream whole, except toolwise's own keys and the protocol envelope
  of the hop; the downstream's progress reaches the caller under the caller's own token.
- A downstream's log messages and requests not tied to a token (sampling, elicitation, roots) belong
  to the client whose call is in flight on that downstream. When no call is in flight, or calls of
  several clients are, nobody can be told apart: log messages go to toolwise's own log, and requests
  get an error saying why.
- Handshake-era clients hear of list changes on their connection: `Callers` keeps a way to reach each
  until its connection ends or a message to it fails.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
import warnings
import weakref
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import mcp_types as types
from mcp import Client
from mcp.server import ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CLIENT_INFO_META_KEY,
    LOG_LEVEL_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    RequestParamsMeta,
)
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import HTTPConnection

from toolwise import sdk
from toolwise.downstream.catalogue import Catalogue
from toolwise.downstream.connection import Downstream

log = logging.getLogger(__name__)

TOOLWISE_META_PREFIX = "toolwise/"
ENVELOPE_KEYS = frozenset({PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY})  # the caller's capabilities go on
PROGRESS_TOKEN = "progressToken"
ANONYMOUS = "anonymous"  # the client of 2026-07-28 HTTP requests without a token (a loopback server)
_PY_LEVEL = {"debug": 10, "info": 20, "notice": 20, "warning": 30, "error": 40}

_keys: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()  # forgotten with the connection


def connection_of(ctx: ServerRequestContext[Any]) -> Connection:
    """The SDK's per-client `Connection` behind a request (read from its session: `sdk`)."""
    return sdk.session_connection(ctx.session)


def modern(ctx: ServerRequestContext[Any]) -> bool:
    """Whether the request came in the 2026-07-28 era (no handshake; no requests back to it mid-call)."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


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


def credential_key(ctx: ServerRequestContext[Any]) -> str | None:
    """A key for the bearer token a request came with (a digest: the token itself is never kept), or
    None without one."""
    if not isinstance(ctx.request, HTTPConnection):  # the HTTP request the SDK hands on (None elsewhere)
        return None
    header = ctx.request.headers.get("authorization")
    if header is None or header[:7].lower() != "bearer ":
        return None
    return "token-" + hashlib.sha256(header[7:].strip().encode()).hexdigest()[:32]


def client_of(ctx: ServerRequestContext[Any]) -> str:
    """The client key of a request; a request on no connection is its own client."""
    return client_key(ctx) or f"request-{id(ctx)}"


def forwarded_meta(meta: Mapping[str, Any] | None) -> RequestParamsMeta | None:
    """The caller's `_meta` as the downstream gets it: whole, except toolwise's own keys, the hop's
    protocol envelope (the downstream connection stamps its own) and the progress token (toolwise
    relays progress under the caller's token itself). A 2026-era caller's declared capabilities go on:
    the downstream must not rely on what the caller did not declare (`sdk.keep_declared_capabilities`)."""
    if not meta:
        return None
    kept = {
        k: v
        for k, v in meta.items()
        if not k.startswith(TOOLWISE_META_PREFIX) and k not in ENVELOPE_KEYS and k != PROGRESS_TOKEN
    }
    return cast(RequestParamsMeta, kept) if kept else None


def wire_meta(ctx: ServerRequestContext[Any]) -> Mapping[str, Any] | None:
    """The request's `_meta` as the client sent it (wire names; the parsed params rename known keys)."""
    meta = (ctx.params or {}).get("_meta")
    return meta if isinstance(meta, Mapping) else None


def progress_relay(ctx: ServerRequestContext[Any], wired: Mapping[str, Any] | None) -> ProgressFnT | None:
    """When the caller asked for progress (`_meta.progressToken`), a callback that tells it, under its
    own token, what the downstream reports. `wired`: the request's `wire_meta` (read once per call)."""
    token = wired.get(PROGRESS_TOKEN) if wired else None
    if token is None:
        return None

    async def relay(progress: float, total: float | None, message: str | None) -> None:
        # The SDK reads the related id only to route the notification to the request's stream.
        related = None if ctx.request_id is None else str(ctx.request_id)
        await ctx.session.send_progress_notification(token, progress, total, message, related)

    return relay


@dataclass(slots=True)
class Caller:
    """A client request in flight on a downstream: where that downstream's messages go."""

    client: str
    ctx: ServerRequestContext[Any]


class InFlight:
    """`Callers.calling`'s block: the caller is in its downstream's list while the block runs (a class, not a
    generator: it is entered on every proxied call)."""

    __slots__ = ("caller", "callers")

    def __init__(self, callers: list[Caller], caller: Caller) -> None:
        self.callers, self.caller = callers, caller

    def __enter__(self) -> None:
        self.callers.append(self.caller)

    def __exit__(self, *exc: object) -> None:
        self.callers.remove(self.caller)


@dataclass
class Callers:
    """The clients calling through toolwise: the calls in flight on each downstream (what that
    downstream sends meanwhile is theirs), the log level clients asked for, and the handshake-era
    clients to tell of list changes."""

    catalogue: Catalogue
    in_flight: dict[str, list[Caller]] = field(default_factory=dict)  # server → requests in flight on it
    log_level: types.LoggingLevel | None = None
    alone: bool = False  # one client (stdio): it owns everything, nothing is kept apart
    _legacy: dict[str, ServerSession] = field(default_factory=dict)  # by client key

    # -- whom a request acts for ---------------------------------------------------------------------

    def serve_alone(self) -> None:
        """This server has one client (stdio): everything recorded is its own, across restarts too."""
        self.alone = True

    def principal(self, ctx: ServerRequestContext[Any]) -> str | None:
        """Who owns what `ctx`'s request records and may act on it (see the module's docstring); None
        for the one client of a server serving alone."""
        if self.alone:
            return None
        return self.principal_of(ctx, client_key(ctx))

    def principal_of(self, ctx: ServerRequestContext[Any], client: str | None) -> str | None:
        """`principal` of a request whose `client_key` is known already (a proxied call reads it once)."""
        if self.alone:
            return None
        return client or credential_key(ctx) or ANONYMOUS

    # -- handshake-era clients, told of list changes -------------------------------------------------

    def remember(self, ctx: ServerRequestContext[Any], key: str) -> None:
        """Keep a way to reach a handshake-era client (2026-era clients listen on the bus)."""
        if not modern(ctx):
            self._legacy[key] = ctx.session

    def forget(self, key: str) -> None:
        self._legacy.pop(key, None)

    async def tell_all(self, send: Callable[[ServerSession], Awaitable[None]], what: str) -> list[str]:
        """Send every remembered client a notification; returns the keys of those that went away
        (forgotten, loudly)."""
        gone = []
        for key, session in list(self._legacy.items()):
            try:
                await send(session)
            except Exception as exc:  # noqa: BLE001 - a client that went away is forgotten, loudly
                log.info("client %s no longer reachable for %s (%s); forgetting it", key, what, exc)
                self._legacy.pop(key, None)
                gone.append(key)
        return gone

    # -- logging -------------------------------------------------------------------------------------

    async def set_logging_level(
        self, ctx: ServerRequestContext[Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        """Fanned out: every handshake-era connection to a downstream that logs gets the level (it is
        shared by all clients, so the last level set holds); 2026-era connections get it per call. Each within
        `call_timeout_s`: one that refuses it or does not answer is logged, naming it, and the others are set."""
        self.log_level = params.level

        async def send(downstream: Downstream, _: Client) -> None:
            client = await downstream.session(handshake=True)  # the handshake-era twin, if it has one
            if client is not None and client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await client.set_logging_level(params.level)
                log.debug("log level %s sent to %s", params.level, downstream.name)

        await self.catalogue.each_offering("logging", f"logging/setLevel {params.level}", send)
        return types.EmptyResult()

    def call_meta(
        self, ctx: ServerRequestContext[Any], server: str, wired: Mapping[str, Any] | None
    ) -> RequestParamsMeta | None:
        """The `_meta` a call goes to `server` with (`forwarded_meta`). A 2026-era downstream logs
        only what a request opts in to: for a handshake-era caller served on a 2026-era connection
        (a stdio downstream's), who hears every level unless it set one, the opt-in is its level (or
        all). `wired`: the request's `wire_meta` (read once per call)."""
        meta = forwarded_meta(wired)
        if modern(ctx):
            return meta
        client = self.catalogue.downstreams[server].connection(handshake=True)
        if (
            client is not None
            and client.protocol_version in MODERN_PROTOCOL_VERSIONS
            and LOG_LEVEL_META_KEY not in (meta or {})
        ):
            meta = cast(RequestParamsMeta, {**(meta or {}), LOG_LEVEL_META_KEY: self.log_level or "debug"})
        return meta

    def calling(self, server: str, ctx: ServerRequestContext[Any], client: str | None = None) -> InFlight:
        """Mark a client request in flight on `server` for a `with` block (what that server sends meanwhile
        is its); `client`: its `client_key`, when known already."""
        return InFlight(self.in_flight.setdefault(server, []), Caller(client or client_of(ctx), ctx))

    def owner(self, server: str) -> Caller | None:
        """The one client with requests in flight on `server`, else None (none, or several)."""
        callers = self.in_flight.get(server) or []
        if not callers or any(c.client != callers[-1].client for c in callers):
            return None
        return callers[-1]

    async def relay_log(self, server: str, params: types.LoggingMessageNotificationParams) -> None:
        caller = self.owner(server)
        if caller is None:
            log.log(_PY_LEVEL.get(params.level, 50), "downstream %s: %s", server, params.data)
            return
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await caller.ctx.session.send_log_message(
                params.level, params.data, logger=server, related_request_id=caller.ctx.request_id
            )

    async def relay_request(self, server: str, request: types.ServerRequest, result: type[Any], capability: str) -> Any:
        """A downstream's sampling, elicitation or roots request, asked of the client whose call is
        in flight on it; an ErrorData the downstream sees when that cannot be."""
        caller = self.owner(server)
        method = request.method
        if caller is None:
            why = "calls of several clients are" if self.in_flight.get(server) else "no client call is"
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"toolwise cannot relay {method}: {why} in flight on this connection, so no client "
                "can be asked (relayed only during a call of one client)",
            )
        if caller.ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"toolwise cannot relay {method}: the calling client speaks {caller.ctx.protocol_version}, "
                "where a server cannot send requests to its client",
            )
        declared = caller.ctx.session.client_capabilities
        if declared is None or getattr(declared, capability, None) is None:
            return types.ErrorData(
                code=INVALID_REQUEST,
                message=f"toolwise cannot relay {method}: the calling client did not declare {capability}",
            )
        try:
            return await caller.ctx.session.send_request(
                request, result, metadata=ServerMessageMetadata(related_request_id=caller.ctx.request_id)
            )
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # noqa: BLE001 - the downstream is told why, in its own protocol
            return types.ErrorData(code=INTERNAL_ERROR, message=f"relaying {method} to the client failed: {exc}")

    def client_callbacks(self, server: str) -> dict[str, Any]:
        """What the downstream connection of `server` declares and how its requests are relayed."""

        async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
            request = types.CreateMessageRequest(params=params)
            return await self.relay_request(server, request, types.CreateMessageResult, "sampling")

        async def elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
            request = types.ElicitRequest(params=params)
            return await self.relay_request(server, request, types.ElicitResult, "elicitation")

        async def roots(context: Any) -> Any:
            return await self.relay_request(server, types.ListRootsRequest(), types.ListRootsResult, "roots")

        async def logged(params: types.LoggingMessageNotificationParams) -> None:
            return None  # log messages are relayed from the message handler (notified)

        return {
            "sampling_callback": sampling,
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
            "logging_callback": logged,
        }
