"""A bounded drain for the HTTP transport: calls in flight are answered, then every stream still open ends.

A client keeps a stream open for as long as it is connected (a GET stream for the server's own messages, a
2026 `subscriptions/listen`), so a server that waits for its connections to close never stops while one is;
uvicorn's own shutdown waits for them. `Draining` sits in front of the MCP app: `close` waits (at most
`grace_s`) for the requests that end by themselves, then answers every request still waiting for its client
with `http.disconnect`, which ends an SSE response (the SDK's, `sse_starlette`'s) at once."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

DISCONNECT: Message = {"type": "http.disconnect"}


LISTEN = b"subscriptions/listen"  # a 2026-07-28 POST that stays open as long as its client listens


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

    async def close(self, grace_s: float) -> None:
        """Let the calls in flight end (at most `grace_s` seconds), then end every stream still open."""
        if self._calls:
            log.info("waiting up to %gs for %d request(s) in flight", grace_s, self._calls)
            try:
                await asyncio.wait_for(self._idle.wait(), grace_s)
            except TimeoutError:
                log.warning("%d request(s) still in flight after %gs: ending them", self._calls, grace_s)
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
