"""A bounded drain for the HTTP transport: calls in flight are answered, then every stream still open ends.

A client keeps a stream open for as long as it is connected (a GET stream for the server's own messages, a
2026 `subscriptions/listen`), so a server that waits for its connections to close never stops while one is;
uvicorn's own shutdown waits for them. `Draining` sits in front of the MCP app: `close` waits (at most
`grace_s`) for the requests that end by themselves, then cuts the MCP requests still running (`cut_on_close`,
the server's middleware: each answered an error saying toolwise is shutting down, on its own response while
that is still open), then answers every request still waiting for its client with `http.disconnect`, which
ends an SSE response (the SDK's, `sse_starlette`'s) at once. Ended by the disconnect alone, a call's answer
had nowhere to go: its client heard a 500 or a stream that ended, and the log an error of uvicorn's
(a response never started) or of the SDK's (its answer's write given up after a second)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import anyio
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

if TYPE_CHECKING:
    from mcp.server import ServerRequestContext
    from mcp.server.context import CallNext, HandlerResult
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

DISCONNECT: Message = {"type": "http.disconnect"}


LISTEN = b"subscriptions/listen"  # a 2026-07-28 POST that stays open as long as its client listens
ANSWER_S = 1.0  # seconds the requests cut get to be answered before every stream ends


def standing(scope: Scope) -> bool:
    """A request that ends only when its client leaves: a GET stream, or a 2026-07-28 listener (its
    `Mcp-Method` header, which the SDK checks against the body's method, names it)."""
    return scope["method"] == "GET" or any(k == b"mcp-method" and v == LISTEN for k, v in scope["headers"])


class Draining:
    """ASGI middleware: counts the requests in flight that end by themselves (every one but a standing
    stream) and, once `close` says so, tells every open request that its client left."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._calls = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._closing = asyncio.Event()
        self._running: set[anyio.CancelScope] = set()  # the MCP requests being served (`cut_on_close`)
        self._grace_s = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stream = standing(scope)
        if not stream:
            self._calls += 1
            self._idle.clear()
        sent = _Sent(send)
        try:
            await self.app(scope, self._until_closing(receive), sent)
            if self._closing.is_set() and sent.open:  # a stream ended by `close`: its response ends cleanly too
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            if not stream:
                self._calls -= 1
                if not self._calls:
                    self._idle.set()

    def _until_closing(self, receive: Receive) -> Receive:
        """`receive`, or a disconnect once closing: what ends a response that waits on its client."""

        async def receive_or_closing() -> Message:
            if self._closing.is_set():
                return DISCONNECT
            message = asyncio.ensure_future(receive())
            closing = asyncio.ensure_future(self._closing.wait())
            try:
                await asyncio.wait((message, closing), return_when=asyncio.FIRST_COMPLETED)
            finally:
                closing.cancel()
                if not message.done():
                    message.cancel()
            return message.result() if message.done() and not message.cancelled() else DISCONNECT

        return receive_or_closing

    async def cut_on_close(self, ctx: ServerRequestContext[Any], call_next: CallNext) -> HandlerResult:
        """The MCP server's middleware: each request (a listener's aside: it ends with its stream) served in a
        cancel scope that `close` cancels once its grace is over, and then answered a CONNECTION_CLOSED error
        saying so (a proxied call cut is recorded as cancelled on its way out, `handlers.forward`)."""
        if ctx.request_id is None or ctx.method == LISTEN.decode():
            return await call_next(ctx)
        with anyio.CancelScope() as scope:
            self._running.add(scope)
            try:
                return await call_next(ctx)
            finally:
                self._running.discard(scope)
        raise MCPError(  # only a cut gets here: its scope swallowed the cancellation
            CONNECTION_CLOSED, f"toolwise is shutting down: {ctx.method} not answered within {self._grace_s:g}s"
        )

    async def close(self, grace_s: float) -> None:
        """Let the calls in flight end (at most `grace_s` seconds), cut the MCP requests still running (each
        answered that toolwise is shutting down, `ANSWER_S` at most), then end every stream still open."""
        if self._calls:
            log.info("waiting up to %gs for %d request(s) in flight", grace_s, self._calls)
            try:
                await asyncio.wait_for(self._idle.wait(), grace_s)
            except TimeoutError:
                log.warning("%d request(s) still in flight after %gs: ending them", self._calls, grace_s)
                self._grace_s = grace_s
                for scope in self._running:
                    scope.cancel()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), ANSWER_S)
        self._closing.set()


class _Sent:
    """`send`, noting whether a response was started and not yet ended."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.open = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.open = True
        elif message["type"] == "http.response.body" and not message.get("more_body", False):
            self.open = False
        await self._send(message)
