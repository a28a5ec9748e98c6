"""A handshake-era connection beside a downstream's 2026-07-28 one, for handshake-era callers.

A downstream that speaks both protocol eras serves each on its own path: on the handshake path it
asks the client mid-call (sampling, elicitation, roots) and takes `resources/subscribe`; on the
2026-07-28 path it answers `input_required` instead and subscriptions are listen streams. toolwise
holds one 2026-07-28 connection to it in `mode: auto`, so a handshake-era caller would meet the
other era's server code. A caller that reached the downstream directly would speak its own era, so
for an HTTP (or in-process) downstream toolwise opens a second connection, with the handshake, when
the first is up, and serves that era's callers on it: what they see, capabilities included, is what
they would see directly. A stdio downstream is one process and one connection; its handshake-era callers
stay on the 2026-07-28 connection, where the SDK resolves the rounds through the relayed callbacks.

The twin lives as long as the main connection: it is closed when that one is, and reopened on the
next need if it dies by itself. A downstream that refuses the handshake (a 2026-only server) is
remembered as such until the main connection is renewed; its handshake-era callers stay on the main
connection meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.session import MessageHandlerFnT

from toolwise.downstream.failures import describe
from toolwise.downstream.listing import all_tools

log = logging.getLogger(__name__)


@dataclass
class Twin:
    """The handshake-era connection of downstream `server` (`client` opens it when none is open)."""

    server: str
    target: Callable[[contextlib.AsyncExitStack, Callable[[], None]], Any]  # what a Client connects to (the main one's)
    hooks: dict[str, Any]  # the relayed callbacks (sampling, elicitation, roots), as the main one's
    relay: Callable[[Any], Awaitable[None]]  # where its notifications go (tool-list changes are the main one's)
    open_timeout_s: float
    tools: frozenset[str] = frozenset()  # the tools it lists (its era's path may list fewer)
    refused: str | None = None  # why the downstream would not take the handshake
    current: Client | None = None  # the connection if it is open now (not yet, being reopened, refused: None)
    on_lost: Callable[[], None] | None = None  # told when it was lost after it was open (not when closed)
    _opened: asyncio.Future[Client] | None = None  # the connection being opened, or open
    _task: asyncio.Task[None] | None = None

    async def client(self) -> Client | None:
        """The handshake-era connection, opened now if none is; None when the downstream refused it."""
        if self.refused is not None:
            return None
        if self._opened is None:
            self._opened = asyncio.get_running_loop().create_future()
            self._task = asyncio.create_task(self._hold(self._opened), name=f"toolwise-twin-{self.server}")
        try:
            return await asyncio.shield(self._opened)
        except ConnectionError:  # `_hold` said why (and set `refused` if the downstream refused it)
            return None

    def close(self) -> None:
        """The main connection ended: so does this one; a renewed main connection may try again."""
        if self._task is not None:
            self._task.cancel()
        self._task, self._opened, self.current, self.refused = None, None, None, None

    async def _hold(self, opened: asyncio.Future[Client]) -> None:
        """Own the connection for its whole life (its context is entered and left in this one task)."""
        lost = asyncio.Event()
        ended = False  # it was open, and was lost
        try:
            async with contextlib.AsyncExitStack() as stack, asyncio.timeout(self.open_timeout_s) as limit:
                handler = self._handler(lost)
                client = Client(self.target(stack, lost.set), mode="legacy", message_handler=handler, **self.hooks)
                await stack.enter_async_context(client)
                self.tools = frozenset(t.name for t in await all_tools(client))
                limit.reschedule(None)
                self.current = client
                opened.set_result(client)
                log.info("downstream %s: a handshake-era connection for handshake-era callers is open", self.server)
                await lost.wait()
            ended = True
            log.warning("downstream %s: its handshake-era connection was lost; reopened on next need", self.server)
        except asyncio.CancelledError:
            if not opened.done():  # its waiters go to the main connection, being renewed too
                opened.set_exception(ConnectionError(f"the connection to {self.server!r} is being renewed"))
                opened.exception()  # read here: when nobody waits, it is no unretrieved error
            raise
        except Exception as exc:  # noqa: BLE001 - said once; its callers go to the main connection
            why = describe(exc, starting=not opened.done(), start_timeout_s=self.open_timeout_s, exit_status=None)
            if opened.done():
                ended = True
                log.warning("downstream %s: handshake-era connection failed (%s)", self.server, why)
            else:
                self.refused = why
                opened.set_exception(ConnectionError(why))
                log.warning(
                    "downstream %s did not take a handshake-era connection (%s); its handshake-era callers "
                    "are served on its 2026-07-28 connection",
                    self.server,
                    why,
                )
        finally:
            if self._opened is opened:  # not renewed meanwhile (`close`)
                self._opened, self.current = None, None
        if ended and self.on_lost is not None and self._task is asyncio.current_task():  # not closed meanwhile
            self.on_lost()  # what was made on it (subscriptions) is gone: made again now

    def _handler(self, lost: asyncio.Event) -> MessageHandlerFnT:
        async def handle(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                if self.current is not None:
                    self.tools = frozenset(t.name for t in await all_tools(self.current))
            elif isinstance(message, ValueError):
                return  # not JSON-RPC: the main connection's junk report counts a process's stdout
            elif isinstance(message, Exception):
                log.warning("downstream %s: handshake-era connection: transport error: %s", self.server, message)
                lost.set()
            else:
                await self.relay(message)

        return handle
