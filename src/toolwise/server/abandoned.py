"""A request whose client left before sending it whole (a timeout, a process killed while it posts) is dropped
quietly: nothing can answer it, and the SDK's transport would read the missing body as an exception (starlette's
`ClientDisconnect`), logged with its traceback at ERROR by uvicorn (2026-07-28) or by the SDK (handshake era)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class Abandoned:
    """ASGI middleware: a request whose `http.disconnect` comes before its body is whole is cancelled where it
    reads (the SDK's handlers catch `Exception`, which a cancellation is not) and ends without an answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        whole = False  # the request's body has been received to its end
        with anyio.CancelScope() as left:

            async def receive_whole() -> Message:
                nonlocal whole
                message = await receive()
                if message["type"] == "http.request":
                    whole = not message.get("more_body", False)
                elif not whole:
                    log.debug("%s %s: the client left before sending the request whole", scope["method"], scope["path"])
                    left.cancel()
                    await anyio.lowlevel.checkpoint()  # the cancellation, raised where the app reads
                return message

            await self.app(scope, receive_whole, send)
