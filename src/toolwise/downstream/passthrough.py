"""Everything a downstream offers besides tools, passed through unchanged: resources, prompts,
completions, logging, progress, and the downstream's own requests (sampling, elicitation, roots).

Only tools/call is recorded and learned from (`server/handlers.py`); this module routes the rest.

- Resources keep the URIs the downstreams gave, except where two downstreams list the same URI (or
  URI template): then each copy becomes `server+uri`. A read is routed by URI: a listed URI, a
  `server+` URI, a URI one downstream's template matches, else the only downstream with resources; a
  downstream coming back that may hold it (restarting, starting) is waited for first.
- Prompts are named like tools (`prefix__name`, `downstream/naming.py`).
- Completions go to the server owning the prompt or the resource template.
- Resource updates go to the clients subscribed (`downstream/subscriptions.py`), list changes to every client.
- What belongs to a call in flight (its `_meta` and progress, the downstream's log messages and its
  sampling, elicitation and roots requests) and `logging/setLevel` are `downstream/callers.py`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise.downstream.callers import Callers, forwarded_meta, modern, wire_meta
from toolwise.downstream.catalogue import Catalogue
from toolwise.downstream.connection import Downstream
from toolwise.downstream.forwarding import is_connection_loss
from toolwise.downstream.listing import all_prompts, all_resources, all_templates
from toolwise.downstream.naming import assign
from toolwise.downstream.subscriptions import Subscriptions

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002  # the MCP specification's code for a resource no server has
R = TypeVar("R")


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
    subscriptions: Subscriptions = field(init=False, repr=False, compare=False)  # `downstream/subscriptions.py`

    def __post_init__(self) -> None:
        self.subscriptions = Subscriptions(self.catalogue, self.callers, self.listeners, self.route_uri, self.notified)

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
        listed, public = await self._refresh_resources()
        return types.ListResourcesResult(
            resources=[r.model_copy(update={"uri": public[(server, r.uri)]}) for server, r in listed]
        )

    async def _refresh_resources(self) -> tuple[list[tuple[str, types.Resource]], dict[tuple[str, str], str]]:
        """Every downstream's resources (server, resource) and their public URIs, kept for routing reads (with
        those of a downstream coming back, not listed now: a read of one waits for it, `_bounded`)."""
        listed, heard = await self._each("resources", "resources/list", all_resources)
        public = _public_uris([(server, r.uri) for server, r in listed])
        fresh = {public[(server, r.uri)]: (server, r.uri) for server, r in listed}
        self.resources = {**self._coming_back(self.resources, heard), **fresh}
        return listed, public

    async def list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        listed, heard = await self._templates()
        public = _public_uris([(server, t.uri_template) for server, t in listed])
        fresh = {public[(server, t.uri_template)]: (server, t.uri_template) for server, t in listed}
        self.templates = {**self._coming_back(self.templates, heard), **fresh}
        return types.ListResourceTemplatesResult(
            resource_templates=[
                t.model_copy(update={"uri_template": public[(server, t.uri_template)]}) for server, t in listed
            ]
        )

    async def _templates(self) -> tuple[list[tuple[str, types.ResourceTemplate]], set[str]]:
        return await self._each("resources", "resources/templates/list", all_templates)

    async def _each(
        self, capability: str, what: str, fetch: Callable[[Client], Awaitable[list[R]]]
    ) -> tuple[list[tuple[str, R]], set[str]]:
        """What each ready downstream offering `capability` lists, as (server, item), and the servers that
        answered; one that fails or does not answer is left out, named in the log (`Catalogue.each_offering`)."""
        listed = await self.catalogue.each_offering(capability, what, lambda _, client: fetch(client))
        return [(server, item) for server, items in listed for item in items], {server for server, _ in listed}

    def _coming_back(self, routes: dict[str, tuple[str, str]], heard: set[str]) -> dict[str, tuple[str, str]]:
        """The `routes` (public → (server, original)) of downstreams not `heard` from now because they are
        coming back (restarting): kept, so that a request for one waits for its downstream rather than going
        to another or being unknown."""
        downstreams = self.catalogue.downstreams
        return {
            public: (server, original)
            for public, (server, original) in routes.items()
            if server not in heard and server in downstreams and downstreams[server].coming_back
        }

    async def route_uri(self, uri: str, deadline: float | None = None) -> tuple[str, str]:
        """(server, the URI there) for a public URI. One the ready downstreams neither list nor match, while a
        downstream that may hold it is coming back (`Downstream.may_offer`), waits for that one by `deadline` (the
        request's, the loop's time; else call_timeout_s from now) and is looked for again: "the only downstream
        with resources" is the only one that may have it, not merely the only one up."""
        if uri in self.resources:
            return self.resources[uri]
        scheme, plus, rest = uri.partition("+")
        if plus and scheme in self.catalogue.downstreams:
            return scheme, rest
        offering = self.catalogue.offering("resources")
        awaited = [d for d in self.catalogue.downstreams.values() if d.may_offer("resources")]
        if len(offering) == 1 and not awaited:
            return offering[0][0].name, uri
        if (found := await self._look_up(uri)) is not None:
            return found
        if awaited:
            deadline = self._deadline() if deadline is None else deadline
            if (found := await self._look_up_as_up(uri, awaited, deadline)) is not None:
                return found
            offering = self.catalogue.offering("resources")
            if down := [d.name for d in awaited if d.client is None]:
                raise MCPError(
                    INTERNAL_ERROR,
                    f"Resource {uri!r} is neither listed nor matched by a template of the servers up, and "
                    f"downstream server(s) {', '.join(map(repr, down))}, which may hold it, were not ready within "
                    f"{self._bound()}; try again shortly",
                    {"uri": uri},
                )
            if len(offering) == 1:
                return offering[0][0].name, uri
        raise MCPError(
            RESOURCE_NOT_FOUND,
            f"Resource not found: {uri!r} is neither listed nor matched by a template of "
            f"{len(offering)} downstream servers with resources",
            {"uri": uri},
        )

    async def _look_up_as_up(self, uri: str, awaited: list[Downstream], deadline: float) -> tuple[str, str] | None:
        """`_look_up` again as each of the `awaited` downstreams comes back, by `deadline`: the one holding `uri`
        is read as soon as it is up, whichever other stays down; None: none back by then holds it."""
        waits = {asyncio.ensure_future(d.wait_up()) for d in awaited}
        try:
            with contextlib.suppress(TimeoutError):  # those not back by then are named by the caller
                async with asyncio.timeout_at(deadline):
                    while waits:
                        _, waits = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                        if (found := await self._look_up(uri)) is not None:
                            return found
        finally:
            for wait in waits:
                wait.cancel()
        return None

    async def _look_up(self, uri: str) -> tuple[str, str] | None:
        """The route of `uri` from the ready downstreams' templates, else from their listing made anew (nothing
        listed yet: a client reading a URI it knows; or changed since); None: neither has it."""
        for server, template in (await self._templates())[0]:
            with contextlib.suppress(InvalidUriTemplate):
                if UriTemplate.parse(template.uri_template).match(uri) is not None:
                    return server, uri
        await self._refresh_resources()
        return self.resources.get(uri)

    def public_uri(self, server: str, uri: str) -> str:
        for public, (owner, original) in self.resources.items():
            if owner == server and original == uri:
                return public
        return uri

    async def read_resource(
        self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        deadline = self._deadline()  # one bound for the routing and the request
        server, uri = await self.route_uri(params.uri, deadline)
        result = await self._forward(
            ctx,
            server,
            f"resources/read of {uri!r}",
            lambda client, meta: client.read_resource(uri, meta=meta),
            lambda client, meta: _read_round(client, uri, params, meta),
            deadline,
        )
        if isinstance(result, types.InputRequiredResult):
            return result
        for content in result.contents:
            if content.uri == uri:
                content.uri = params.uri
        return result

    # -- prompts and completions --------------------------------------------------------------------

    async def list_prompts(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        listed = await self._refresh_prompts()
        return types.ListPromptsResult(
            prompts=[p.model_copy(update={"name": self.public_prompt[pair]}) for pair, p in listed.items()]
        )

    async def _refresh_prompts(self) -> dict[tuple[str, str], types.Prompt]:
        """Every downstream's prompts by (server, name), their public names kept for routing (with those of a
        downstream coming back, not listed now: a request for one waits for it, `_bounded`)."""
        each, heard = await self._each("prompts", "prompts/list", all_prompts)
        listed = {(server, p.name): p for server, p in each}
        self.public_prompt = assign(listed, self.catalogue.prefixes)
        fresh = {public: pair for pair, public in self.public_prompt.items()}
        self.prompts = {**self._coming_back(self.prompts, heard), **fresh}
        return listed

    async def _route_prompt(self, name: str, deadline: float) -> tuple[str, str]:
        """(server, its name) for a public prompt name. One listed before but not now is still routed to its
        downstream while it comes back (`_refresh_prompts`); one never listed, whose prefix names a downstream
        coming back (restarting: prompts/list leaves it out meanwhile), is looked for again once that one is
        up, by `deadline` (the request's: the loop's time)."""
        if name not in self.prompts:
            await self._refresh_prompts()
        if name not in self.prompts and (server := self._coming_back_as(name)) is not None:
            await self.catalogue.session(server, handshake=False, deadline=deadline)  # not up by then: said
            try:
                async with asyncio.timeout_at(deadline):
                    await self._refresh_prompts()
            except TimeoutError:
                raise MCPError(REQUEST_TIMEOUT, f"prompts/list did not answer within {self._bound()}") from None
        if name not in self.prompts:
            raise MCPError(INVALID_PARAMS, f"Unknown prompt: {name!r} (see prompts/list)")
        return self.prompts[name]

    def _coming_back_as(self, name: str) -> str | None:
        """The downstream, down and coming back, whose prefix `name` carries (None: no such one)."""
        downstream = self.catalogue.carrier(name)
        return downstream.name if downstream is not None and downstream.coming_back else None

    async def get_prompt(
        self, ctx: ServerRequestContext[Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        deadline = self._deadline()  # one bound for the routing and the request
        server, name = await self._route_prompt(params.name, deadline)
        return await self._forward(
            ctx,
            server,
            f"prompts/get of {name!r}",
            lambda client, meta: client.get_prompt(name, params.arguments, meta=meta),
            lambda client, meta: _prompt_round(client, name, params, meta),
            deadline,
        )

    async def complete(
        self, ctx: ServerRequestContext[Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref, deadline = params.ref, self._deadline()
        if isinstance(ref, types.PromptReference):
            server, name = await self._route_prompt(ref.name, deadline)
            ref = ref.model_copy(update={"name": name})
        else:
            if ref.uri not in self.templates:
                await self.list_resource_templates(ctx, None)
            if ref.uri in self.templates:
                server, template = self.templates[ref.uri]
            else:
                server, template = await self.route_uri(ref.uri, deadline)
            ref = ref.model_copy(update={"uri": template})
        context = params.context.arguments if params.context is not None else None
        argument = {"name": params.argument.name, "value": params.argument.value}
        asked = ref

        async def complete(client: Client) -> types.CompleteResult:
            return await client.complete(asked, argument, context)

        return await self._bounded(ctx, server, "completion/complete", complete, deadline)

    async def _forward(
        self,
        ctx: ServerRequestContext[Any],
        server: str,
        what: str,
        plain: Callable[[Client, types.RequestParamsMeta | None], Awaitable[R]],
        rounds: Callable[[Client, types.RequestParamsMeta | None], Awaitable[R]],
        deadline: float | None = None,
    ) -> R:
        """A request that may ask the caller for input, `_bounded`, with the caller's `_meta`: `rounds` where
        caller and downstream both answer input_required as it is (`in_rounds`), else `plain`."""
        meta = forwarded_meta(wire_meta(ctx))

        async def request(client: Client) -> R:
            return await (rounds if in_rounds(ctx, client) else plain)(client, meta)

        return await self._bounded(ctx, server, what, request, deadline)

    async def _bounded(
        self,
        ctx: ServerRequestContext[Any],
        server: str,
        what: str,
        request: Callable[[Client], Awaitable[R]],
        deadline: float | None = None,
    ) -> R:
        """`request` on `server`'s session within `call_timeout_s`, as a tool call is: past it the
        downstream is told to stop (the SDK's courtesy cancel of a cancelled request) and the caller gets
        an MCP error naming the downstream and the setting. A downstream restarting is waited for within the
        same time; one whose connection is found closed is reconnected (`Downstream.broke`), as for a tool call.
        What the downstream asks meanwhile goes to this caller. `deadline`: the request's, when its routing
        already counted against it (a prompt looked for); else call_timeout_s from now."""
        deadline = self._deadline() if deadline is None else deadline
        client = await self.catalogue.session(server, handshake=not modern(ctx), deadline=deadline)
        bounded = asyncio.timeout_at(deadline)
        try:
            async with bounded:
                with self.callers.calling(server, ctx):
                    return await request(client)
        except TimeoutError:
            if not bounded.expired():
                raise
            raise MCPError(
                REQUEST_TIMEOUT,
                f"{what} on {server!r} did not answer within {self._bound()}; it was told to stop",
            ) from None
        except Exception as exc:
            if not is_connection_loss(exc):
                raise
            self.catalogue.downstreams[server].broke(client)  # as a tool call does: the next request, anew
            raise MCPError(
                INTERNAL_ERROR,
                f"downstream server {server!r} closed the connection during {what}; it is being restarted, "
                "ask again shortly",
            ) from exc

    def _deadline(self) -> float:
        """A request's deadline from now, the loop's time: call_timeout_s, as a tool call's."""
        return asyncio.get_running_loop().time() + self.catalogue.settings.call_timeout_s

    def _bound(self) -> str:
        return f"{self.catalogue.settings.call_timeout_s:g}s (call_timeout_s)"

    def client_callbacks(self, server: str) -> dict[str, Any]:
        """What the downstream connection of `server` declares and how its requests are relayed."""
        return self.callers.client_callbacks(server)

    def reconnected(self, server: str, *, twin: bool = False) -> None:
        """`server` is up on a new connection (`twin`: its handshake-era twin alone was lost): the resource
        subscriptions still held are made again (on a twin opened anew)."""
        self.subscriptions.renew(server, twin=twin)

    async def notified(self, server: str, message: Any) -> None:
        """A downstream's notification (tool-list changes are the catalogue's)."""
        if isinstance(message, types.LoggingMessageNotification):
            await self.callers.relay_log(server, message.params)
        elif isinstance(message, types.ResourceUpdatedNotification):
            public = self.public_uri(server, message.params.uri)
            await self.bus.publish(ResourceUpdated(uri=public))
            await self.subscriptions.updated(public)
        elif isinstance(message, types.ResourceListChangedNotification):
            await self.bus.publish(ResourcesListChanged())
            gone = await self.callers.tell_all(ServerSession.send_resource_list_changed, "resource changes")
            self.subscriptions.unsubscribe_all(gone)
        elif isinstance(message, types.PromptListChangedNotification):
            await self.bus.publish(PromptsListChanged())
            gone = await self.callers.tell_all(ServerSession.send_prompt_list_changed, "prompt changes")
            self.subscriptions.unsubscribe_all(gone)


def _public_uris(pairs: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """URIs as given, except that a URI listed by several servers becomes `server+uri` for each."""
    owners: dict[str, set[str]] = {}
    for server, uri in pairs:
        owners.setdefault(uri, set()).add(server)
    return {(server, uri): uri if len(owners[uri]) == 1 else f"{server}+{uri}" for server, uri in pairs}


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
