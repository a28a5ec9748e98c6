"""Resource subscriptions passed through: a subscription to a public URI is made at the downstream
that owns it once, whoever asks first, and ended when its last subscriber goes; the downstream's
updates go to the clients subscribed (to a session told directly, to a listen stream through the bus).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import SubscriptionLost
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import event_to_notification
from mcp_types.jsonrpc import INTERNAL_ERROR
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise.background import Background
from toolwise.downstream.callers import Callers, client_of, connection_of
from toolwise.downstream.catalogue import Catalogue

log = logging.getLogger(__name__)

UNSUBSCRIBE_S = 5.0  # longest a closed listen stream waits for its downstream unsubscriptions
_WATCHED = "toolwise/subscriptions-watched"  # marks a connection whose end drops its subscriptions


@dataclass
class Subscriptions:
    catalogue: Catalogue
    callers: Callers  # a client found gone is forgotten there too
    listeners: ListenHandler  # serves subscriptions/listen once the downstreams are subscribed
    route_uri: Callable[[str], Awaitable[tuple[str, str]]]  # public URI → (server, the URI there)
    notified: Callable[[str, Any], Awaitable[None]]  # where a followed downstream's updates go
    # public URI → subscribed client → its session (None: a listen stream, told through the bus)
    subscribers: dict[str, dict[str, ServerSession | None]] = field(default_factory=dict)
    following: dict[tuple[str, str], asyncio.Task[None]] = field(default_factory=dict)  # 2026 downstreams' streams
    subscribed_on: dict[tuple[str, str], Client] = field(default_factory=dict)  # handshake-era subscriptions
    subscribing: dict[str, asyncio.Future[None]] = field(
        default_factory=dict
    )  # public URI → its subscription being made
    routes: dict[str, tuple[str, str]] = field(default_factory=dict)  # public URI subscribed → (server, URI there)
    renewing: dict[tuple[str, str], asyncio.Task[None]] = field(default_factory=dict)  # (server, URI) → its renewal
    _background: Background = field(default_factory=Background)

    async def subscribe_resource(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        key = client_of(ctx)
        self._watch(ctx, key)
        await self._subscribe(params.uri, key, ctx.session)
        return types.EmptyResult()

    def _watch(self, ctx: ServerRequestContext[Any], key: str) -> None:
        """A client's HTTP session that ends (DELETE, idle timeout) takes its subscriptions with it: else
        they stay in these books, and made at the downstream, for as long as toolwise runs."""
        connection = connection_of(ctx)
        if connection.session_id is None or _WATCHED in connection.state:
            return
        connection.state[_WATCHED] = True
        connection.exit_stack.callback(self.unsubscribe_all, [key])

    async def unsubscribe_resource(
        self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self._unsubscribe(params.uri, client_of(ctx))
        return types.EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """2026-07-28 `subscriptions/listen`: the stream's resource subscriptions are made at the
        downstreams for as long as it lasts; the events come through the bus."""
        uris = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        listener = f"listen-{uuid.uuid4()}"
        subscribed: list[str] = []
        try:
            for uri in uris:
                await self._subscribe(uri, listener, None)
                subscribed.append(uri)
            return await self.listeners(ctx, params)
        finally:
            # A client's disconnect cancels the stream, not this; but a downstream that no longer answers
            # (it is shutting down, or stuck) holds it up for UNSUBSCRIBE_S at most, never for ever.
            with anyio.move_on_after(UNSUBSCRIBE_S, shield=True) as cleanup:
                for uri in subscribed:
                    try:
                        await self._unsubscribe(uri, listener)
                    except Exception as exc:  # noqa: BLE001 - said; the stream's other subscriptions are undone all the same
                        log.warning("%s: unsubscribing from %s failed: %s", listener, uri, exc)
            if cleanup.cancelled_caught:
                log.warning("%s: downstream unsubscriptions unanswered after %.0f s", listener, UNSUBSCRIBE_S)

    async def _subscribe(self, uri: str, client: str, session: ServerSession | None) -> None:
        """`client` (its session, when told directly; None when the bus tells it) hears of `uri`, once the
        downstream took the subscription. The first subscriber's request makes it in a task of its own
        (`_subscribe_first`): one that goes away meanwhile does not cut it short (nor drop the others),
        and those that came meanwhile wait for it and hear how it went."""
        server, original = await self.route_uri(uri)
        clients = self.subscribers.setdefault(uri, {})
        self.routes[uri] = (server, original)
        first = not clients
        clients[client] = session
        making = self.subscribing.get(uri)
        if first and making is None:
            making = asyncio.ensure_future(self._subscribe_first(uri, server, original, handshake=session is not None))
            self.subscribing[uri] = making
            making.add_done_callback(_heard)
        if making is None:
            return
        try:
            await asyncio.shield(making)
        except BaseException:
            clients.pop(client, None)  # gone, or refused with every other waiter
            if not clients and self.subscribers.get(uri) is clients:
                self.subscribers.pop(uri, None)
                self.routes.pop(uri, None)
                if making.done() and not making.cancelled() and making.exception() is None:  # made: nobody left
                    self._background.spawn(
                        self._unsubscribe_downstream(server, original),
                        name=f"toolwise-unsubscribe-{server}",
                        failure=f"unsubscribing from {original} on {server} failed",
                    )
            raise

    async def _subscribe_first(self, uri: str, server: str, original: str, *, handshake: bool) -> None:
        try:
            await self._subscribe_downstream(server, original, handshake=handshake)
        except BaseException:
            self.subscribers.pop(uri, None)  # its waiters hear why; one asking next makes it anew
            self.routes.pop(uri, None)
            raise
        finally:
            self.subscribing.pop(uri, None)
        if not self.subscribers.get(uri):  # every subscriber went away meanwhile
            await self._unsubscribe_downstream(server, original)

    async def _unsubscribe(self, uri: str, client: str) -> None:
        server, original = self.routes.get(uri) or await self.route_uri(uri)  # where it was made
        clients = self.subscribers.get(uri, {})
        clients.pop(client, None)
        if not clients:
            self.subscribers.pop(uri, None)
            self.routes.pop(uri, None)
            await self._unsubscribe_downstream(server, original)

    async def _subscribe_downstream(self, server: str, uri: str, *, handshake: bool) -> None:
        """Subscribe at the downstream on the connection of the first subscriber's era: on a 2026-07-28
        one, a listen stream per URI; on a handshake-era one, `resources/subscribe`."""
        client = await self.catalogue.session(server, handshake=handshake)
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            lost = partial(self.catalogue.downstreams[server].broke, client)  # the process it followed is gone
            self.following[(server, uri)] = self._background.spawn(
                _follow(self.notified, server, client, uri, opened, lost),
                name=f"toolwise-follow-{server}",
                failure=f"following {uri} on {server} failed; its updates are no longer relayed",
            )
            try:  # subscribed once the downstream acknowledged the stream
                await asyncio.wait_for(asyncio.shield(opened), self.catalogue.settings.call_timeout_s)
            except TimeoutError:
                self.following.pop((server, uri)).cancel()
                raise MCPError(
                    INTERNAL_ERROR,
                    f"downstream server {server!r} did not open a stream of updates of {uri!r} within "
                    f"{self.catalogue.settings.call_timeout_s:g}s (call_timeout_s)",
                ) from None
            return
        with warnings.catch_warnings():  # the handshake era's way, served to that era's downstreams
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.subscribe_resource(uri)
        self.subscribed_on[(server, uri)] = client

    async def _unsubscribe_downstream(self, server: str, uri: str) -> None:
        await _unsubscribe_on(self._release(server, uri), uri)

    def _release(self, server: str, uri: str) -> Client | None:
        """The downstream subscription to `uri` is no longer toolwise's (a 2026-era stream is stopped now);
        the handshake-era connection that still holds one, to be unsubscribed on."""
        if (task := self.following.pop((server, uri), None)) is not None:
            task.cancel()
        return self.subscribed_on.pop((server, uri), None)

    def renew(self, server: str, *, twin: bool = False) -> None:
        """`server` is up on a new connection (it restarted): the subscriptions made on the one before went
        with it, unknown to the new process; each still held is made again on the new connection (one whose
        making failed at the reconnect before, too). `twin`: only its handshake-era twin was lost (`twin.py`):
        the subscriptions made on it are made again, on a twin opened anew."""
        stale = {uri: True for (owner, uri) in self.subscribed_on if owner == server} if twin else self._held(server)
        for uri, handshake in stale.items():
            if (earlier := self.renewing.pop((server, uri), None)) is not None:
                earlier.cancel()  # superseded (made on the connection before, it would be made twice)
            self._release(server, uri)  # a lost connection's: nothing to undo at the downstream
            renewal = self.renewing[(server, uri)] = self._background.spawn(
                self._renew(server, uri, handshake=handshake),
                name=f"toolwise-resubscribe-{server}",
                failure=f"subscribing to {uri} on {server} again failed; tried again when it next reconnects",
            )
            renewal.add_done_callback(partial(self._renewed, (server, uri)))

    def _renewed(self, key: tuple[str, str], renewal: asyncio.Task[None]) -> None:
        if self.renewing.get(key) is renewal:
            del self.renewing[key]

    def _held(self, server: str) -> dict[str, bool]:
        """The subscriptions held at `server` (its URI → made for a handshake-era subscriber: the first's era),
        but those being made (made on the new connection)."""
        held: dict[str, bool] = {}
        for public, (owner, uri) in self.routes.items():
            if owner == server and public not in self.subscribing:
                sessions = self.subscribers.get(public, {}).values()
                held[uri] = held.get(uri, False) or any(session is not None for session in sessions)
        return held

    async def _renew(self, server: str, uri: str, *, handshake: bool) -> None:
        if (server, uri) not in self.routes.values():  # its last subscriber left meanwhile
            return
        await self._subscribe_downstream(server, uri, handshake=handshake)
        if (server, uri) not in self.routes.values():
            await self._unsubscribe_downstream(server, uri)

    async def updated(self, public: str) -> None:
        """The clients subscribed to `public` with a session of their own hear of its update."""
        for key, session in list(self.subscribers.get(public, {}).items()):
            if session is not None:
                await self._tell(key, session.send_resource_updated(public))

    async def _tell(self, key: str, sending: Any) -> None:
        try:
            await sending
        except Exception as exc:  # noqa: BLE001 - a client that went away is forgotten, loudly
            log.info("client %s no longer reachable (%s); forgetting it", key, exc)
            self.callers.forget(key)
            self.unsubscribe_all([key])

    def unsubscribe_all(self, keys: list[str]) -> None:
        """Clients that went away hear of no more resource updates; a downstream subscription they were
        the last to hold is undone (at once in toolwise's books: the next subscriber makes one anew)."""
        for uri, clients in list(self.subscribers.items()):
            held = len(clients)
            for key in keys:
                clients.pop(key, None)
            if clients or not held:
                continue
            self.subscribers.pop(uri, None)
            route = self.routes.pop(uri, None)
            if route is None or uri in self.subscribing:  # one being made is undone once made (`_subscribe_first`)
                continue
            server, original = route
            if (connection := self._release(server, original)) is not None:
                self._background.spawn(
                    _unsubscribe_on(connection, original),
                    name=f"toolwise-unsubscribe-{server}",
                    failure=f"unsubscribing from {original} on {server} failed",
                )


async def _unsubscribe_on(connection: Client | None, uri: str) -> None:
    """End a handshake-era downstream subscription (None: nothing to end)."""
    if connection is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await connection.unsubscribe_resource(uri)


def _heard(making: asyncio.Future[None]) -> None:
    """A downstream subscription was made or refused: its waiters heard how (none may be left to)."""
    if not making.cancelled() and (failure := making.exception()) is not None:
        log.info("a downstream subscription was refused: %s", failure)


async def _follow(
    notified: Callable[[str, Any], Awaitable[None]],
    server: str,
    client: Client,
    uri: str,
    opened: asyncio.Future[None],
    lost: Callable[[], None],
) -> None:
    """Relay a 2026-era downstream's updates of `uri` (its subscriptions are listen streams). A stream lost
    (the downstream restarted: a sessionless HTTP connection goes on) is `lost`: the connection is made
    anew, and its subscriptions with it."""
    try:
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            opened.set_result(None)
            async for event in subscription:
                await notified(server, event_to_notification(event, {}))
    except SubscriptionLost:
        log.warning("downstream %s ended the stream of updates of %s (it restarted?): reconnecting", server, uri)
        lost()
    except BaseException as exc:
        if opened.done():
            raise
        if isinstance(exc, asyncio.CancelledError):
            opened.cancel()
            raise
        opened.set_exception(exc)  # the subscriber hears why; nothing is left to log
