"""The downstream servers (`connection.py`: one long-lived MCP session each), their tools under
`server__tool` names.

Why not `mcp.client.session_group.ClientSessionGroup`: it raises on a tool-name collision instead
of resolving it, always uses the handshake-era `initialize`, and neither restarts a dead server nor
isolates one that fails to start; here each of those is required behaviour.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR

from toolwise.background import Background
from toolwise.config import ServerSpec, Settings, prefix_of
from toolwise.downstream.connection import Downstream, Health
from toolwise.downstream.forwarding import InputRound, forward
from toolwise.downstream.naming import assign, carries_prefix
from toolwise.downstream.relaying import Relay
from toolwise.downstream.routes import Route, SchemaCheck
from toolwise.downstream.tracing import Tracing

log = logging.getLogger(__name__)
R = TypeVar("R")
# Removed tools remembered (`Catalogue.gone`), the newest: a downstream renaming tools forever stays bounded.
GONE_KEPT = 1000


class Catalogue:
    """All downstreams and the public tool names that route to them."""

    def __init__(self, servers: Mapping[str, ServerSpec], settings: Settings, tracing: Tracing | None = None) -> None:
        """`tracing`: a CLIENT span for every call made of a downstream (None: tracing is off)."""
        self.settings = settings
        self.tracing = tracing
        self.downstreams = {
            name: Downstream(name, spec, settings, self._rebuild, tracing=tracing) for name, spec in servers.items()
        }
        self.routes: dict[str, Route] = {}
        # Public names of tools a downstream stopped listing while served → that server: a call or a
        # recommendation of one is told it was removed, not that it never existed (dropped once listed again).
        self.gone: dict[str, str] = {}
        self.prefixes = {name: prefix_of(name, spec) for name, spec in servers.items()}
        self.reserved: frozenset[str] = frozenset()  # toolwise's own tool names: never given to a downstream's
        self.on_change: Callable[[], Coroutine[Any, Any, None]] | None = None  # `serve` sets it
        self._announcing = Background()
        self._launched = False  # `launch` has waited for the processes once
        self._started_at: float | None = None  # loop time of the first start: `first_started`'s deadline

    def serve(self, on_change: Callable[[], Coroutine[Any, Any, None]], reserved: frozenset[str]) -> None:
        """Served by an app (which may start after the downstreams were launched): `on_change` runs after
        every change of the tool list, and no downstream tool takes a name in `reserved` (the app's own)."""
        self.on_change, self.reserved = on_change, reserved

    async def launch(self) -> None:
        """Start every downstream and return once each has spawned its process (or ended its first
        attempt, or after `start_wait_s`): what else a start does can run while they boot. Waits once:
        a catalogue launched before its app (`transports.launched`) is not waited for again."""
        if not self._launched:
            self._launched = True
            await self._start_each(Downstream.wait_launched)

    async def start(self) -> None:
        """Start every downstream concurrently; return once each is up or has failed once, or after
        `start_wait_s`: one that hangs at start delays nobody, its tools are added (and announced as a
        tool-list change) when it comes up."""
        await self._start_each(Downstream.wait_first_attempt)
        for h in self.health():
            if h.state == "starting":
                log.warning(
                    "downstream %s is still starting after %gs (start_wait_s); serving without it until it is up",
                    h.server,
                    self.settings.start_wait_s,
                )
            elif h.state != "ready":
                log.error(  # read in a client's log: the command a terminal has to find out why
                    "downstream %s did not start: %s (the others serve; retrying; `toolwise doctor` says what to fix)",
                    h.server,
                    h.error,
                )

    async def _start_each(self, ready: Callable[[Downstream], Coroutine[Any, Any, None]]) -> None:
        """Start every downstream (a started one is left as it is) and wait until each is `ready`, at
        most `start_wait_s`."""
        if self._started_at is None:
            self._started_at = asyncio.get_running_loop().time()
        for downstream in self.downstreams.values():
            downstream.start()
        waits = [asyncio.create_task(ready(d)) for d in self.downstreams.values()]
        if waits:
            _, waiting = await asyncio.wait(waits, timeout=self.settings.start_wait_s)
            for task in waiting:
                task.cancel()

    async def first_started(self, enough: Callable[[], bool] = lambda: False) -> bool:
        """Wait until every downstream has ended its first start (up, or failed once), or `enough` holds
        after one has, at most until `start_timeout_s` after the start (which bounds each first start
        anyway); True if it waited. What a client's tools/list waits for: a downstream still starting
        after `start_wait_s` would be missing from it, and not every client refreshes its list on
        `tools/list_changed`."""
        starting = [d for d in self.downstreams.values() if not d.first_start_over]
        if not starting or self._started_at is None:
            return False
        waits = {asyncio.ensure_future(d.wait_first_attempt()) for d in starting}
        deadline = self._started_at + self.settings.start_timeout_s
        log.info("waiting up to %.1fs for downstreams still starting", deadline - asyncio.get_running_loop().time())
        try:
            while waits and not enough():
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                _, waits = await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        return True

    async def aclose(self, *, abandoned: bool = False) -> None:
        """Stop every downstream; `abandoned`: toolwise's start failed, each is killed at once (`Downstream.aclose`)
        and the announcements of tool lists they sent meanwhile are cancelled (nobody is served to hear them)."""
        await asyncio.gather(*(d.aclose(abandoned=abandoned) for d in self.downstreams.values()))
        if abandoned:
            await self._announcing.cancel()

    def health(self) -> list[Health]:
        return [d.health() for d in self.downstreams.values()]

    def tools(self) -> list[types.Tool]:
        return [route.public for route in self.routes.values()]

    def resolve(self, public_name: str) -> Route | None:
        return self.routes.get(public_name)

    def carrier(self, public_name: str) -> Downstream | None:
        """The downstream whose prefix `public_name` carries (the longest such prefix; None: none does): whose
        tool it would be, listed or not."""
        carrying = [(len(p), s) for s, p in self.prefixes.items() if carries_prefix(public_name, p)]
        return self.downstreams[max(carrying)[1]] if carrying else None

    async def call(
        self,
        route: Route,
        arguments: dict[str, Any] | None,
        meta: types.RequestParamsMeta | None = None,
        progress: ProgressFnT | None = None,
        rounds: InputRound | None = None,
        caller: str | None = None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """Forward one call (of the client `caller`) over its route's downstream, through the circuit breaker."""
        downstream, timeout_s = self.downstreams[route.server], self.settings.call_timeout_s
        return await forward(downstream, route.tool, arguments, timeout_s, meta, progress, rounds, caller)

    def offering(self, capability: str) -> list[tuple[Downstream, Client]]:
        """The ready downstreams whose capabilities include `capability` (resources, prompts, …)."""
        ready = []
        for downstream in self.downstreams.values():
            client = downstream.client
            if client is not None and getattr(client.server_capabilities, capability, None) is not None:
                ready.append((downstream, client))
        return ready

    async def each_offering(
        self, capability: str, what: str, request: Callable[[Downstream, Client], Awaitable[R]]
    ) -> list[tuple[str, R]]:
        """`request` of every ready downstream offering `capability`, side by side, each within `call_timeout_s`:
        one that fails or does not answer is logged naming it and why, and left out (a fan-out fails no client
        for one downstream's sake); the others' answers as (server, answer)."""
        timeout_s = self.settings.call_timeout_s

        async def one(downstream: Downstream, client: Client) -> list[tuple[str, R]]:
            bounded = asyncio.timeout(timeout_s)
            try:
                async with bounded:
                    return [(downstream.name, await request(downstream, client))]
            except Exception as exc:  # noqa: BLE001 - its failure is its own: said, and the others answered
                why = f"no answer within {timeout_s:g}s (call_timeout_s)" if bounded.expired() else str(exc)
                log.warning("%s of downstream %r failed: %s; the others went on", what, downstream.name, why)
                return []

        answers = await asyncio.gather(*(one(d, client) for d, client in self.offering(capability)))
        return [pair for answered in answers for pair in answered]

    def capabilities(self, *, handshake: bool) -> dict[str, Any]:
        """The union of what the downstreams offer (besides tools) to a caller of that era, as
        ServerCapabilities fields."""
        union: dict[str, Any] = {}
        for downstream in self.downstreams.values():
            client = downstream.connection(handshake=handshake)
            if client is None:
                continue
            caps = client.server_capabilities
            if caps.resources is not None:
                old = union.get("resources") or types.ResourcesCapability(subscribe=False, list_changed=False)
                union["resources"] = types.ResourcesCapability(
                    subscribe=bool(old.subscribe or caps.resources.subscribe),
                    list_changed=bool(old.list_changed or caps.resources.list_changed),
                )
            if caps.prompts is not None:
                old_p = union.get("prompts") or types.PromptsCapability(list_changed=False)
                union["prompts"] = types.PromptsCapability(
                    list_changed=bool(old_p.list_changed or caps.prompts.list_changed)
                )
            for name in ("logging", "completions"):
                if getattr(caps, name) is not None:
                    union[name] = getattr(caps, name)
        return union

    async def session(self, server: str, *, handshake: bool, deadline: float | None = None) -> Client:
        """The connection to `server` for a request of a handshake-era (or 2026-era) caller
        (`Downstream.session`), or the protocol error a client is answered with while it is down. With a
        `deadline` (the loop's time), one coming back (starting, restarting) is waited for until then, as a tool
        call waits for it: a request made during a restart is answered, not refused."""
        downstream = self.downstreams[server]
        try:
            async with asyncio.timeout_at(deadline):  # None: unbounded (the caller bounds it)
                client = await downstream.session(handshake=handshake)  # may open its handshake-era twin
                if client is None and deadline is not None and downstream.coming_back:
                    await downstream.wait_up()
                    client = await downstream.session(handshake=handshake)
        except TimeoutError:
            raise MCPError(
                INTERNAL_ERROR,
                f"downstream server {server!r} was not ready within {self.settings.call_timeout_s:g}s "
                f"(call_timeout_s; {downstream.state}); try again shortly",
            ) from None
        if client is None:
            raise MCPError(
                INTERNAL_ERROR, f"downstream server {server!r} is not running ({downstream.state}); try again shortly"
            )
        return client

    def attach(self, relay: Relay) -> None:
        """Give every downstream somewhere to send what is not about tools (before `start`)."""
        for downstream in self.downstreams.values():
            downstream.relay = relay

    def _route(self, public: str, server: str, tool: types.Tool) -> Route:
        """A route with its argument check (compiled at the tool's first call), kept while the tool's schema
        stays the same."""
        old = self.routes.get(public)
        if old is not None and old.server == server and old.public.input_schema == tool.input_schema:
            check = old.check
        else:
            check = SchemaCheck(public, tool.input_schema)
        return Route(server, tool.name, tool.model_copy(update={"name": public}), check)

    def _forget(self, routes: Mapping[str, Route]) -> None:
        """Note the tools `routes` no longer holds in `gone` (at most `GONE_KEPT`, the newest), and drop
        from it those listed again."""
        for public, route in self.routes.items():
            if public not in routes:
                self.gone.pop(public, None)  # re-inserted: the newest
                self.gone[public] = route.server
        for public in routes:
            self.gone.pop(public, None)
        while len(self.gone) > GONE_KEPT:
            del self.gone[next(iter(self.gone))]

    def _rebuild(self) -> None:
        """Recompute the public names after any downstream's tool list changed."""
        by_pair = {(d.name, t.name): t for d in self.downstreams.values() for t in d.tools}
        kept = {(r.server, r.tool): public for public, r in self.routes.items()}
        names = assign(by_pair, self.prefixes, self.reserved, kept)
        routes = {
            public: self._route(public, server, by_pair[(server, tool)]) for (server, tool), public in names.items()
        }
        changed = {n: r.public for n, r in routes.items()} != {n: r.public for n, r in self.routes.items()}
        self._forget(routes)
        self.routes = routes
        if changed and self.on_change is not None:
            self._announcing.spawn(
                self.on_change(), name="toolwise-tools-changed", failure="announcing the tool-list change failed"
            )
