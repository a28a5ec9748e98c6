"""The composition root: `Toolwise` owns the running services (feedback store, downstream catalogue,
learning, sharing, snapshots, the upkeep beside them), starts and stops them, and answers what the handlers
(`server/handlers.py`) ask of them: what tools/list shows, where a call goes, which connection is whose.
`server/build.py` builds the MCP `Server` over it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ToolsListChanged

from toolwise.config import AppConfig, InProcessServer
from toolwise.downstream.callers import connection_of, modern, progress_relay, wire_meta
from toolwise.downstream.catalogue import Catalogue
from toolwise.downstream.errors import DownstreamError, InvalidArgumentsError
from toolwise.downstream.forwarding import InputRound
from toolwise.downstream.passthrough import Passthrough
from toolwise.downstream.routes import Route
from toolwise.downstream.tracing import Tracing
from toolwise.errors import UserError
from toolwise.feedback import FeedbackService
from toolwise.feedback.errors import describe_database_error
from toolwise.feedback.failures import DATABASE_FAILURES
from toolwise.learning.metrics import Metrics
from toolwise.learning.teaching import MODEL_LOAD_THREAD
from toolwise.learning.worker import abandonable
from toolwise.rl import Decision
from toolwise.server import heap
from toolwise.server.discovery import (
    CALL_TOOL,
    SEARCH_TOOLS,
    CallToolInput,
    call_tool_definition,
    search_tool,
)
from toolwise.server.exposure import Exposure
from toolwise.server.own import OwnTool
from toolwise.server.services import Services
from toolwise.server.tools import own_tools
from toolwise.server.upkeep import Upkeep

log = logging.getLogger(__name__)
UNMARKED_RESNAPSHOT = 10_000  # own executions unseen in the log that make a shutdown sync and snapshot again
_WATCHED = "toolwise/watched"  # marks a connection whose end frees its session


class Toolwise:
    """Everything a running toolwise holds. Use as `async with Toolwise(config) as app:`."""

    def __init__(
        self,
        config: AppConfig,
        passthrough: Passthrough | None = None,
        in_process: Mapping[str, InProcessServer] | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        """`passthrough`: of a catalogue whose downstreams were already launched (`transports.launched`);
        else the downstreams are launched when the app is entered. `in_process`: more downstreams, SDK
        `Server` objects served in this process, beside the config's. `tracing`: of a catalogue built
        here (a given catalogue brings its own); None, tracing is off."""
        settings = config.toolwise
        self.config = config
        self.feedback = FeedbackService(
            settings.database_url,
            store_arguments=settings.store_arguments,
            store_queries=settings.store_queries,
            flush_interval_ms=settings.flush_interval_ms,
            synchronous=settings.sqlite_synchronous,
            store_timeout_s=settings.store_timeout_s,
        )
        self.metrics = Metrics()
        if passthrough is None:
            passthrough = Passthrough.serving(Catalogue(config.downstreams(in_process), settings, tracing))
        self.passthrough = passthrough
        self.catalogue = passthrough.catalogue
        self.tracing = self.catalogue.tracing
        self.callers = passthrough.callers
        self.services = Services.open(settings, self.feedback, self.catalogue, self.metrics)
        self.learning, self.sharing, self.snapshots = (
            self.services.learning,
            self.services.sharing,
            self.services.snapshots,
        )
        self.own: dict[str, OwnTool[Any, Any]] = own_tools(
            admin=settings.admin_tools, snapshots=settings.snapshot_tools
        )
        if settings.exposure != "all":
            self.own[SEARCH_TOOLS] = search_tool()
        self._own_definitions = [t.definition() for t in self.own.values()]  # fixed: schemas built once
        if settings.exposure != "all":
            self._own_definitions.append(call_tool_definition())
        self.catalogue.serve(
            self._tools_changed, frozenset([*self.own, *([CALL_TOOL] if settings.exposure != "all" else [])])
        )
        self.exposure = Exposure(settings, self.catalogue)
        self._listed = self.exposure.tools(self._own_definitions, None)  # `all`'s, rebuilt when a catalogue changes
        self.upkeep = Upkeep(self.services)
        self._upkeep: asyncio.Task[None] | None = None
        self._holds_heap = False  # held from the end of its start until it stops (server/heap.py)
        self.metrics.watch(self.upkeep.gauges)

    async def __aenter__(self) -> Toolwise:
        # The downstreams' processes boot while the database opens. Serving starts once they are up; the
        # learned state loads after that, in the upkeep task (decoding a large state is CPU the first
        # answers need not wait for): meanwhile recommendations come from the prior and calls
        # wait to be learned into it.
        self.learning.begin_loading()
        warming = None
        opened = False
        try:
            await self.catalogue.launch()
            embedder = self.learning.embedder  # loaded in a thread of its own while they boot and the database opens
            if embedder is not None:
                warming = asyncio.ensure_future(abandonable(lambda _: embedder.load(), name=MODEL_LOAD_THREAD))
            await self.feedback.start()
            opened = True
            if warming is not None:
                await warming
            await self.catalogue.start()
            self._listed = self.exposure.tools(self._own_definitions, None)
            # Listed and embedded while it serves (own tools wait for the listing); with a seed before, so that
            # decisions replay exactly.
            await self.learning.set_tools(self.catalogue.tools(), first=self.config.toolwise.seed is None)
            await self.upkeep.heartbeat()
        except BaseException:
            # Its start given up (its database failed, a stop signal cancelled it while it waited for a
            # downstream): the downstreams, maybe still booting, killed at once; the model's load and the
            # embedding of the tools they listed meanwhile abandoned, so that the error ends the process at once
            # rather than once the model has loaded for nobody; the database closed if it was open.
            # The downstreams go first: one that lists its tools meanwhile would start a teaching after it stopped.
            if warming is not None:
                warming.cancel()
            await self.catalogue.aclose(abandoned=True)
            await self.learning.stop_teaching()
            if opened:
                await self.feedback.aclose()
            raise
        heap.hold()  # what start-up built, out of the collections' walks: the upkeep settles the loaded state
        self._holds_heap = True
        self._upkeep = asyncio.create_task(self.upkeep.run(), name="toolwise-upkeep")
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            if self._upkeep is not None:
                self._upkeep.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._upkeep
            # The snapshot first: a client gives a server little time once it closes stdin (the SDK's
            # stdio client: 2 s, then SIGTERM, then SIGKILL 2 s later). The snapshot lists this run's
            # own executions not yet seen in the log, for the next start to skip; when they are many
            # (no periodic sync ran), a sync moves the watermark over them and a second snapshot
            # saves the next start from reading them again.
            cut_short = self.learning.loading
            waited = cut_short and self.learning.pending > 0
            self.learning.end_loading()  # the calls noted meanwhile are recorded all the same
            await self.learning.aclose()
            bounded = asyncio.timeout(self.config.toolwise.store_timeout_s)
            try:
                async with bounded:
                    await self._store_at_shutdown(cut_short, waited)
            except DATABASE_FAILURES as failure:
                if bounded.expired():  # a store that never answers (a lock, a partition) must not hold up SIGTERM
                    log.error(  # noqa: TRY400 - nothing to trace: the database did not answer
                        "no shutdown snapshot or heartbeat: the database did not answer within %g s"
                        " (store_timeout_s), abandoned; the next start replays the log",
                        self.config.toolwise.store_timeout_s,
                    )
                else:
                    log.error(  # noqa: TRY400 - one line: the writer has logged the failure in full
                        "no shutdown snapshot, the database is failing (%s); the next start replays the log",
                        describe_database_error(failure),
                    )
        finally:
            if self._holds_heap:
                heap.release()
                self._holds_heap = False
            self.passthrough.listeners.close()
            await self.catalogue.aclose()
            await self.feedback.aclose()

    async def _store_at_shutdown(self, cut_short: bool, waited: bool) -> None:
        """The shutdown snapshot and last heartbeat (`__aexit__` bounds them by `store_timeout_s`, so that
        the writer's last records are dead-lettered after them even when the database never answers)."""
        # A load cut short leaves the empty state: stored as the newest, it would hide the snapshot
        # it was loading. Calls that waited for the load (or the first catalogue's embedding) were
        # learned just now without it (the unembedded documents' cosine at 0): a snapshot would keep
        # them so. Neither is stored; the next start loads the snapshot before, if any, and learns
        # this run's calls from the log, once, every document embedded.
        keep = cut_short and (waited or bool(await self.feedback.snapshots.list(self.learning.namespace)))
        if keep:
            log.warning(
                "no shutdown snapshot: stopped before the learned state was loaded or the tools embedded;"
                " the next start learns this run's calls from the log"
            )
        else:
            await self.snapshots.save("shutdown")
        await self.upkeep.heartbeat(stopped=True)
        if not keep and self.learning.unmarked >= UNMARKED_RESNAPSHOT:
            await self.sharing.sync()
            await self.snapshots.save("shutdown")

    def list_tools(self, client: str | None = None) -> list[types.Tool]:
        """tools/list for `client`: with every tool exposed, a list prepared once per catalogue change;
        otherwise the pinned and (`learned`) the client's learned ones."""
        if self.exposure.mode == "all":
            return self._listed
        return self.exposure.tools(self._own_definitions, client)

    async def decided(self, ctx: ServerRequestContext[Any], client: str | None, decision: Decision) -> None:
        """A recommend_tool/search_tools decision: in `learned` exposure, tell the client when its
        listed tools change (handshake era on its connection; 2026-era listeners on the bus)."""
        if not self.exposure.note(client, decision):
            return
        if modern(ctx):
            await self.passthrough.bus.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()

    async def first_started(self, enough: Callable[[], bool] = lambda: False) -> None:
        """Wait for the downstreams still in their first start (`Catalogue.first_started`), then list
        what they brought (the tool-list change they caused may not have run yet)."""
        if await self.catalogue.first_started(enough):
            self._listed = self.exposure.tools(self._own_definitions, None)  # marked, as `_tools_changed` lists

    async def _tools_changed(self) -> None:
        """A downstream's tools changed: teach the learner the catalogue and tell every client."""
        self._listed = self.exposure.tools(self._own_definitions, None)
        await self.learning.set_tools(self.catalogue.tools())
        await self.passthrough.bus.publish(ToolsListChanged())
        await self.callers.tell_all(ServerSession.send_tool_list_changed, "tool changes")

    def watch_connection(self, ctx: ServerRequestContext[Any], key: str | None) -> None:
        """Free a client connection's session (and its list_changed channel) when the connection ends
        (HTTP DELETE, idle timeout, a crash): the SDK unwinds the connection's exit stack then. Only
        transport sessions are watched (per-request connections have no session id). `key`: the
        request's `client_key`."""
        # The low-level context reaches its `Connection` only through the session until the SDK's
        # context rework (its TODO L54); the exit stack is the SDK's documented per-connection teardown.
        connection = connection_of(ctx)
        if connection.session_id is None or key is None or _WATCHED in connection.state:
            return
        connection.state[_WATCHED] = True
        connection.exit_stack.callback(self._forget, key)

    def target(self, name: str, arguments: dict[str, Any] | None) -> tuple[str, dict[str, Any] | None]:
        """The tool a call is for: `call_tool`'s (outside `all` exposure) is the one it names, called
        exactly as if by its own name."""
        if name != CALL_TOOL or self.exposure.mode == "all":
            return name, arguments
        wanted = CallToolInput.model_validate(arguments or {})
        if wanted.name == CALL_TOOL:  # wrapped once too often: named, as an unknown tool it is listed
            inner = (wanted.arguments or {}).get("name")
            example = inner if isinstance(inner, str) else "<the tool>"
            raise UserError(f"name the tool to call, not {CALL_TOOL}: {CALL_TOOL}(name={example!r}, arguments={{…}})")
        return wanted.name, wanted.arguments

    def _forget(self, key: str) -> None:
        self.learning.sessions.pop(key)
        self.learning.session_closed(key)
        self.exposure.forget(key)
        self.callers.forget(key)

    async def call_downstream(
        self,
        route: Route,
        arguments: dict[str, Any] | None,
        ctx: ServerRequestContext[Any],
        rounds: InputRound | None,
        client: str | None,
        owner: str | None,
    ) -> tuple[types.CallToolResult | types.InputRequiredResult | None, DownstreamError | None]:
        """The downstream's answer to one call, or why there is none. Arguments that break the tool's
        schema are the caller's mistake: refused here, never forwarded, blamed on no downstream.
        `client`, `owner`: the request's `client_key` and `Callers.principal_of` (its timeouts are its own
        until others see them), read once per call."""
        wrong = route.problem(arguments)
        if wrong is not None:
            message = f"invalid arguments for {route.public.name}: {wrong} (not forwarded to {route.server!r})"
            return None, InvalidArgumentsError(message)
        try:
            with self.callers.calling(route.server, ctx, client):
                wired = wire_meta(ctx)
                meta = self.callers.call_meta(ctx, route.server, wired)
                relay = progress_relay(ctx, wired)
                return await self.catalogue.call(route, arguments, meta, relay, rounds, owner), None
        except DownstreamError as exc:
            return None, exc

    def remember_client(self, ctx: ServerRequestContext[Any], key: str) -> None:
        """Handshake-era clients hear of list changes on their connection: keep a way to reach them."""
        self.callers.remember(ctx, key)
