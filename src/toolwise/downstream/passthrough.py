"""Everything a downstream offers besides tools, passed through unchanged: resources, prompts,
completions, logging, progress, and the downstream's own requests (sampling, elicitation, roots).

Only tools/call is recorded and learned from (`server/handlers.py`); this module routes the rest.

- Resources keep the URIs the downstreams gave, except where two downstreams list the same URI (or
  URI template): then each copy becomes `server+uri`. A read is routed by URI: a listed URI, a
  `server+` URI, a URI one downstream's template matches, else the only downstream with resources.
- Prompts are named like tools (`prefix__name`, `downstream/naming.py`).
- Completions go to the server owning the prompt or the resource template.
- Resource updates go to the clients subscribed, list changes to every client.
- What belongs to a call in flight (its `_meta` and progress, the downstream's log messages and its
  sampling, elicitation and roots requests) and `logging/setLevel` are `downstream/callers.py`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.subscriptions import SubscriptionLost
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, event_to_notification
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise.background import Background
from toolwise.downstream.callers import Callers, client_of, forwarded_meta, modern, wire_meta
from toolwise.downstream.catalogue import Catalogue
from toolwise.downstream.listing import all_prompts, all_resources, all_templates
from toolwise.downstream.naming import assign

log = logging.getLogger(__name__)

UNSUBSCRIBE_S = 5.0  # longest a closed listen stream waits for its downstream unsubscriptions
RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource no server has


PASSED_THROUGH = ("resources", "prompts", "logging", "completions")  # capabilities toolwise has only from downstreams


@dataclass
class Passthrough:
    catalogue: Catalogue
    bus: InMemorySubscriptionBus
    callers: Callers  # who calls: what a downstream sends besides these answers goes to them
    listeners: ListenHandler  # serves subscriptions/listen once the downstreams are subscribed
    resources: dict[str, tuple[str, str]] = field(default_factory=dict)  # public URI → (server, URI)
    templates: dict[str, tuple[str, str]] = field(default_factory=dict)  # public template → (server, template)
    prompts: dict[str, tuple[str, str]] = field(default_factory=dict)  # public name → (server, name)
    public_prompt: dict[tuple[str, str], str] = field(default_factory=dict)  # the reverse
    # public URI → subscribed client → its session (None: a listen stream, told through the bus)
    subscribers: dict[str, dict[str, ServerSession | None]] = field(default_factory=dict)
    following: dict[tuple[str, str], asyncio.Task[None]] = field(default_factory=dict)  # 2026 downstreams' streams
    subscribed_on: dict[tuple[str, str], Client] = field(default_factory=dict)  # handshake-era subscriptions
    subscribing: dict[str, asyncio.Future[None]] = field(
        default_factory=dict
    )  # public URI → its subscription being made
    _background: Background = field(default_factory=Background)

    @classmethod
    def serving(cls, catalogue: Catalogue) -> Passthrough:
        """The pass-through of `catalogue`, attached to it: before its downstreams are launched, since
        what a downstream connection declares (sampling, elicitation, roots) is fixed when it connects."""
        bus = InMemorySubscriptionBus()
        passthrough = cls(catalogue, bus, Callers(catalogue), ListenHandler(bus))
        catalogue.attach(passthrough)
        return passthrough

    # -- resources ----------------------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        listed = [
            (downstream.name, r)
            for downstream, client in self.catalogue.offering("resources")
            for r in await all_resources(client)
        ]
        public = _public_uris([(server, r.uri) for server, r in listed])
        self.resources = {public[(server, r.uri)]: (server, r.uri) for server, r in listed}
        return types.ListResourcesResult(
            resources=[r.model_copy(update={"uri": public[(server, r.uri)]}) for server, r in listed]
        )

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        listed = await self._templates()
        public = _public_uris([(server, t.uri_template) for server, t in listed])
        self.templates = {public[(server, t.uri_template)]: (server, t.uri_template) for server, t in listed}
        return types.ListResourceTemplatesResult(
            resource_templates=[
                t.model_copy(update={"uri_template": public[(server, t.uri_template)]}) for server, t in listed
            ]
        )

    async def _templates(self) -> list[tuple[str, types.ResourceTemplate]]:
        return [
            (downstream.name, t)
            for downstream, client in self.catalogue.offering("resources")
            for t in await all_templates(client)
        ]

    async def route_uri(self, uri: str) -> tuple[str, str]:
        """(server, the URI there) for a public URI."""
        if uri in self.resources:
            return self.resources[uri]
        scheme, plus, rest = uri.partition("+")
        if plus and scheme in self.catalogue.downstreams:
            return scheme, rest
        offering = self.catalogue.offering("resources")
        if len(offering) == 1:
            return offering[0][0].name, uri
        for server, template in await self._templates():
            with contextlib.suppress(InvalidUriTemplate):
                if UriTemplate.parse(template.uri_template).match(uri) is not None:
                    return server, uri
        raise MCPError(
            RESOURCE_NOT_FOUND,
            f"Resource not found: {uri!r} is neither listed nor matched by a template of "
            f"{len(offering)} downstream servers with resources",
            {"uri": uri},
        )

    def public_uri(self, server: str, uri: str) -> str:
        for public, (owner, original) in self.resources.items():
            if owner == server and original == uri:
                return public
        return uri

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        server, uri = await self.route_uri(params.uri)
        client = await self.catalogue.session(server, handshake=not modern(ctx))
        meta = forwarded_meta(wire_meta(ctx))
        result: types.ReadResourceResult | types.InputRequiredResult
        with self.callers.calling(server, ctx):  # what the downstream asks mid-request goes to this caller
            if in_rounds(ctx, client):
                result = await _read_round(client, uri, params, meta)
            else:
                result = await client.read_resource(uri, meta=meta)
        if isinstance(result, types.InputRequiredResult):
            return result
        for content in result.contents:
            if content.uri == uri:
                content.uri = params.uri
        return result

    async def subscribe_resource(
        self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        await self._subscribe(params.uri, client_of(ctx), ctx.session)
        return types.EmptyResult()

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
                    await self._unsubscribe(uri, listener)
            if cleanup.cancelled_caught:
                log.warning("%s: downstream unsubscriptions unanswered after %.0f s", listener, UNSUBSCRIBE_S)

    async def _subscribe(self, uri: str, client: str, session: ServerSession | None) -> None:
        """`client` (its session, when told directly; None when the bus tells it) hears of `uri`, once the
        downstream took the subscription. The first subscriber's request makes it in a task of its own
        (`_subscribe_first`): one that goes away meanwhile does not cut it short (nor drop the others),
        and those that came meanwhile wait for it and hear how it went."""
        server, original = await self.route_uri(uri)
        clients = self.subscribers.setdefault(uri, {})
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
            raise
        finally:
            self.subscribing.pop(uri, None)
        if not self.subscribers.get(uri):  # every subscriber went away meanwhile
            await self._unsubscribe_downstream(server, original)

    async def _unsubscribe(self, uri: str, client: str) -> None:
        server, original = await self.route_uri(uri)
        clients = self.subscribers.get(uri, {})
        clients.pop(client, None)
        if not clients:
            self.subscribers.pop(uri, None)
            await self._unsubscribe_downstream(server, original)

    async def _subscribe_downstream(self, server: str, uri: str, *, handshake: bool) -> None:
        """Subscribe at the downstream on the connection of the first subscriber's era: on a 2026-07-28
        one, a listen stream per URI; on a handshake-era one, `resources/subscribe`."""
        client = await self.catalogue.session(server, handshake=handshake)
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self.following[(server, uri)] = self._background.spawn(
                _follow(self.notified, server, client, uri, opened),
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
        if (task := self.following.pop((server, uri), None)) is not None:
            task.cancel()
        elif (held := self.subscribed_on.pop((server, uri), None)) is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await held.unsubscribe_resource(uri)

    # -- prompts and completions --------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        listed = await self._refresh_prompts()
        return types.ListPromptsResult(
            prompts=[p.model_copy(update={"name": self.public_prompt[pair]}) for pair, p in listed.items()]
        )

    async def _refresh_prompts(self) -> dict[tuple[str, str], types.Prompt]:
        listed = {
            (downstream.name, p.name): p
            for downstream, client in self.catalogue.offering("prompts")
            for p in await all_prompts(client)
        }
        self.public_prompt = assign(listed, self.catalogue.prefixes)
        self.prompts = {public: pair for pair, public in self.public_prompt.items()}
        return listed

    async def _route_prompt(self, name: str) -> tuple[str, str]:
        if name not in self.prompts:
            await self._refresh_prompts()
        if name not in self.prompts:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r} (see prompts/list)")
        return self.prompts[name]

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        server, name = await self._route_prompt(params.name)
        client = await self.catalogue.session(server, handshake=not modern(ctx))
        meta = forwarded_meta(wire_meta(ctx))
        with self.callers.calling(server, ctx):  # what the downstream asks mid-request goes to this caller
            if in_rounds(ctx, client):
                return await _prompt_round(client, name, params, meta)
            return await client.get_prompt(name, params.arguments, meta=meta)

    async def complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            server, name = await self._route_prompt(ref.name)
            ref = ref.model_copy(update={"name": name})
        else:
            if ref.uri not in self.templates:
                await self.list_resource_templates(ctx, None)
            if ref.uri in self.templates:
                server, template = self.templates[ref.uri]
            else:
                server, template = await self.route_uri(ref.uri)
            ref = ref.model_copy(update={"uri": template})
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        client = await self.catalogue.session(server, handshake=not modern(ctx))
        return await client.complete(ref, argument, context)

    def client_callbacks(self, server: str) -> dict[str, Any]:
        """What the downstream connection of `server` declares and how its requests are relayed."""
        return self.callers.client_callbacks(server)

    async def notified(self, server: str, message: Any) -> None:
        """A downstream's notification (tool-list changes are the catalogue's)."""
        if isinstance(message, types.LoggingMessageNotification):
            await self.callers.relay_log(server, message.params)
        elif isinstance(message, types.ResourceUpdatedNotification):
            public = self.public_uri(server, message.params.uri)
            await self.bus.publish(ResourceUpdated(uri=public))
            for key, session in list(self.subscribers.get(public, {}).items()):
                if session is not None:
                    await self._tell(key, session.send_resource_updated(public))
        elif isinstance(message, types.ResourceListChangedNotification):
            await self.bus.publish(ResourcesListChanged())
            gone = await self.callers.tell_all(ServerSession.send_resource_list_changed, "resource changes")
            self._unsubscribe_all(gone)
        elif isinstance(message, types.PromptListChangedNotification):
            await self.bus.publish(PromptsListChanged())
            gone = await self.callers.tell_all(ServerSession.send_prompt_list_changed, "prompt changes")
            self._unsubscribe_all(gone)

    async def _tell(self, key: str, sending: Any) -> None:
        try:
            await sending
        except Exception as exc:  # noqa: BLE001 - a client that went away is forgotten, loudly
            log.info("client %s no longer reachable (%s); forgetting it", key, exc)
            self.callers.forget(key)
            self._unsubscribe_all([key])

    def _unsubscribe_all(self, keys: list[str]) -> None:
        """Clients that went away hear of no more resource updates."""
        for key in keys:
            for clients in self.subscribers.values():
                clients.pop(key, None)


def _public_uris(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """URIs as given, except that a URI listed by several servers becomes `server+uri` for each."""
    owners: dict[str, set[str]] = {}
    for server, uri in pairs:
        owners.setdefault(uri, set()).add(server)
    return {(server, uri): uri if len(owners[uri]) == 1 else f"{server}+{uri}" for server, uri in pairs}


def _heard(making: asyncio.Future[None]) -> None:
    """A downstream subscription was made or refused: its waiters heard how (none may be left to)."""
    if not making.cancelled() and (failure := making.exception()) is not None:
        log.info("a downstream subscription was refused: %s", failure)


async def _follow(
    notified: Callable[[str, Any], Awaitable[None]], server: str, client: Client, uri: str, opened: asyncio.Future[None]
) -> None:
    """Relay a 2026-era downstream's updates of `uri` (its subscriptions are listen streams)."""
    try:
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            opened.set_result(None)
            async for event in subscription:
                await notified(server, event_to_notification(event, {}))
    except SubscriptionLost:
        log.warning("downstream %s ended the stream of updates of %s (it restarted?)", server, uri)
    except BaseException as exc:
        if opened.done():
            raise
        if isinstance(exc, asyncio.CancelledError):
            opened.cancel()
            raise
        opened.set_exception(exc)  # the subscriber hears why; nothing is left to log


def in_rounds(ctx: ServerRequestContext[Any], client: Client) -> bool:
    """A 2026-era caller of a 2026-era downstream: an input_required answer goes back to it as it is
    (see catalogue.InputRound); any other pair, the SDK resolves the rounds through the relay."""
    return modern(ctx) and client.protocol_version in MODERN_PROTOCOL_VERSIONS


async def _read_round(
    client: Client, uri: str, params: types.ReadResourceRequestParams, meta: types.RequestParamsMeta | None
) -> types.ReadResourceResult | types.InputRequiredResult:
    return await client.session.read_resource(
        uri,
        input_responses=params.input_responses,
        request_state=params.request_state,
        meta=meta,
        allow_input_required=True,
    )


async def _prompt_round(
    client: Client, name: str, params: types.GetPromptRequestParams, meta: types.RequestParamsMeta | None
) -> types.GetPromptResult | types.InputRequiredResult:
    return await client.session.get_prompt(
        name,
        params.arguments,
        input_responses=params.input_responses,
        request_state=params.request_state,
        meta=meta,
        allow_input_required=True,
    )
