"""The composition root: the running services and the MCP `Server` with every handler named here.

`Toolwise` owns the services (feedback store, downstream catalogue, learning, sharing, snapshots);
`build_server` hands the low-level `Server` two handlers of ours (`tools/list`, `tools/call`: plain
module-level functions that reach the running app as their lifespan context, so a test can drive
them through `Client(build_server(app))`) plus the pass-through ones. Errors become `is_error`
results in one place: `on_call_tool`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import timedelta
from typing import Any

import mcp_types as types
from mcp.server import InitializationOptions, NotificationOptions, Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ToolsListChanged
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from toolwise.config import AppConfig, InProcessServer, describe
from toolwise.downstream.callers import client_key, connection_of, modern, progress_relay
from toolwise.downstream.catalogue import Catalogue
from toolwise.downstream.errors import CallCancelledError, DownstreamError, InvalidArgumentsError, RefusedCallerError
from toolwise.downstream.forwarding import InputRound
from toolwise.downstream.outcome import outcome_of
from toolwise.downstream.passthrough import PASSED_THROUGH, Passthrough
from toolwise.downstream.routes import Route
from toolwise.downstream.tracing import Tracing
from toolwise.errors import UserError
from toolwise.feedback import FeedbackError, FeedbackService, StoreUnavailableError, utcnow
from toolwise.feedback.errors import describe_database_error
from toolwise.feedback.instances import HEARTBEAT_S
from toolwise.feedback.records import InstanceStatus
from toolwise.learning.metrics import Metrics
from toolwise.learning.sessions import EXECUTION_META_KEY, Session
from toolwise.rl import Decision
from toolwise.server.discovery import (
    CALL_TOOL,
    SEARCH_TOOLS,
    CallToolInput,
    Exposure,
    call_tool_definition,
    search_tool,
)
from toolwise.server.own import OwnTool
from toolwise.server.services import Services
from toolwise.server.stats import learning_stats
from toolwise.server.tools import own_tools
from toolwise.server.tracing import middleware, noted, recommended

log = logging.getLogger(__name__)
STALE_CALLS = 64  # calls pending past which a recommendation waits for them to be learned first (staleness bound)

VERSION = "0.1.0"
UNMARKED_RESNAPSHOT = 10_000  # own executions unseen in the log that make a shutdown sync and snapshot again
_WATCHED = "toolwise/watched"  # marks a connection whose end frees its session
DECIDING = ("recommend_tool", SEARCH_TOOLS)  # own tools whose answer is a decision (learned exposure)
INSTRUCTIONS = (
    "toolwise proxies the tools of several MCP servers (named server__tool) and learns which tool fits "
    "a task. Call recommend_tool with what you want to do before choosing a tool, then rate results "
    "with submit_feedback; recommend_next_tools suggests what usually comes next."
)
SEARCH_INSTRUCTIONS = (
    " Not every tool is listed: search_tools finds the tools for a task (full definitions), the ones above "
    "too when the query names one; call_tool calls any of them by name."
)


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
        self.started_at = utcnow()
        self._upkeep: asyncio.Task[None] | None = None
        self.metrics.watch(self._gauges)

    async def __aenter__(self) -> Toolwise:
        # The downstreams' processes boot while the database opens. Serving starts once they are up; the
        # learned state loads after that, in the upkeep task (decoding a large state is CPU the first
        # answers need not wait for): meanwhile recommendations come from the prior and calls
        # wait to be learned into it.
        self.learning.begin_loading()
        await self.catalogue.launch()
        embedder = self.learning.embedder  # loaded in a worker thread while they boot and the database opens
        warming = asyncio.ensure_future(asyncio.to_thread(embedder.load)) if embedder is not None else None
        try:
            await self.feedback.start()
            if warming is not None:
                await warming
        except BaseException:
            await self.catalogue.aclose()
            raise
        await self.catalogue.start()
        self._listed = self.exposure.tools(self._own_definitions, None)
        # Embedded while it serves; with a seed before, so that decisions replay exactly.
        await self.learning.set_tools(self.catalogue.tools(), first=self.config.toolwise.seed is None)
        await self._heartbeat()
        self._upkeep = asyncio.create_task(self._upkeep_loop(), name="toolwise-upkeep")
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
            self.learning.end_loading()  # the calls noted meanwhile are recorded all the same
            await self.learning.aclose()
            try:
                # A load cut short leaves the empty state: stored as the newest, it would hide the snapshot
                # it was loading (the next start loads that one and learns this run's calls from the log).
                keep = cut_short and bool(await self.feedback.snapshots.list(self.learning.namespace))
                if keep:
                    log.warning("no shutdown snapshot: stopped before the learned state was loaded")
                else:
                    await self.snapshots.save("shutdown")
                await self._heartbeat(stopped=True)
                if not keep and self.learning.unmarked >= UNMARKED_RESNAPSHOT:
                    await self.sharing.sync()
                    await self.snapshots.save("shutdown")
            except (FeedbackError, SQLAlchemyError, OSError) as failure:
                log.error(  # noqa: TRY400 - one line: the writer has logged the failure in full
                    "no shutdown snapshot, the database is failing (%s); the next start replays the log",
                    describe_database_error(failure),
                )
        finally:
            self.passthrough.listeners.close()
            await self.catalogue.aclose()
            await self.feedback.aclose()

    # -- upkeep: sharing, snapshots, retention, heartbeat -----------------------------------------------

    async def _upkeep_loop(self) -> None:
        settings = self.config.toolwise
        tick = settings.sync_interval_s or 5.0
        try:  # start-up: load the newest snapshot, while tools/list and calls are served
            loaded = await self.snapshots.load_latest()
            log.info("learned state: %s; serving the policy once the log after it is learned", loaded)
        except Exception:
            log.exception("loading the newest snapshot failed: learning the whole log instead")
        try:  # calls are learned once the tools' documents are embedded: never with their cosine missing
            await self.learning.catalogue_taken()
        except Exception:
            log.exception("embedding the tools' documents failed: BM25 alone scores them until the next change")
        self.learning.end_loading()
        try:  # then learn the log after it, likewise
            await self.snapshots.catch_up(settings.snapshot_rows)
        except Exception:
            log.exception("catching up with the log failed (the next sync resumes it)")
        last_snapshot = last_heartbeat = time.monotonic()
        while True:
            await asyncio.sleep(tick)
            try:
                await self.snapshots.follow_restores()
                if settings.sync_interval_s:
                    await self.sharing.sync()
                interval = settings.snapshot_interval_s
                by_time = interval and time.monotonic() - last_snapshot >= interval
                by_rows = settings.snapshot_rows and self.learning.state.unsnapshotted >= settings.snapshot_rows
                if by_time or by_rows:
                    last_snapshot = time.monotonic()
                    await self.snapshots.save("periodic")
                    await self.prune()
                if time.monotonic() - last_heartbeat >= HEARTBEAT_S:
                    last_heartbeat = time.monotonic()
                    await self._heartbeat()
            except Exception:
                log.exception("upkeep failed (learning goes on; retried in %.1fs)", tick)

    async def prune(self) -> int:
        """Retention: delete executions older than the TTL whose effect the newest snapshot holds."""
        days = self.config.toolwise.retention_days
        newest = await self.feedback.snapshots.get(namespace=self.learning.namespace) if days else None
        if days is None or newest is None:
            return 0
        before = utcnow() - timedelta(days=days)
        floor = int(newest.covered["executions"]["floor"])
        deleted = await self.feedback.log.prune(before, namespace=self.learning.namespace, max_seq=floor)
        if deleted:
            log.info("retention: pruned %d executions older than %s", deleted, before.isoformat())
        return deleted

    def status(self) -> dict[str, Any]:
        """What this instance reports about itself (heartbeat, `toolwise inspect status`)."""
        stats = learning_stats(self.services)
        return {
            "policy": stats.policy,
            "serving": stats.serving,
            "flags": stats.flags,
            "downstreams": [asdict(h) for h in stats.downstreams],
            "open_circuits": stats.open_circuits,
            "shielded_tools": stats.shielded_tools,
            "tools": stats.tools,
            "calls": stats.calls,
            "decisions": stats.decisions,
            "updates": stats.updates,
            "synced": stats.synced,
            "snapshot": stats.snapshot_id,
            "store": stats.store,
            "epsilon": stats.epsilon,
            "epsilon_reason": stats.epsilon_reason,
            "drifts": stats.drifts,
        }

    async def _heartbeat(self, *, stopped: bool = False) -> None:
        now = utcnow()
        await self.feedback.instances.heartbeat(
            InstanceStatus(
                id=self.learning.instance_id,
                namespace=self.learning.namespace,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=self.started_at,
                heartbeat_at=now,
                status=self.status(),
                stopped_at=now if stopped else None,
            )
        )

    def _gauges(self) -> dict[str, tuple[str, float]]:
        stats = learning_stats(self.services)
        return {
            "exploration_rate": ("Share of recommendations that explored.", stats.exploration_rate or 0.0),
            "exploration_epsilon": ("The adaptive exploration rate now (rises when rewards fall).", stats.epsilon),
            "reopened_tools": ("Tools the drift guard re-opened to exploration.", len(stats.reopened_tools)),
            "decisions": ("Recommendations made since start.", stats.decisions),
            "learner_updates": ("Updates the learner has made.", stats.updates),
            "queue_depth": ("Execution records waiting for group commit.", stats.queued_records + stats.pending),
            "flush_failures": ("Group-commit batches the database refused.", stats.failed_batches),
            "dead_lettered": ("Records written to the dead-letter file.", stats.dead_lettered),
            "store_failing": ("1 while the database refuses writes (see the log for why).", stats.store_failing),
            "open_circuits": ("Downstreams whose circuit is open.", len(stats.open_circuits)),
            "downstreams_ready": ("Downstreams serving.", sum(h.state == "ready" for h in stats.downstreams)),
            "shielded_tools": ("Tools dropped from recommendations by the shields.", len(stats.shielded_tools)),
        }

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
            self._listed = self._own_definitions + self.catalogue.tools()

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
    ) -> tuple[types.CallToolResult | types.InputRequiredResult | None, DownstreamError | None]:
        """The downstream's answer to one call, or why there is none. Arguments that break the tool's
        schema are the caller's mistake: refused here, never forwarded, blamed on no downstream.
        `client`: the request's `client_key`."""
        wrong = route.problem(arguments)
        if wrong is not None:
            message = f"invalid arguments for {route.public.name}: {wrong} (not forwarded to {route.server!r})"
            return None, InvalidArgumentsError(message)
        try:
            with self.callers.calling(route.server, ctx, client):
                meta = self.callers.call_meta(ctx, route.server)
                caller = self.callers.principal_of(ctx, client)  # its timeouts are its own until others see them
                return await self.catalogue.call(route, arguments, meta, progress_relay(ctx), rounds, caller), None
        except DownstreamError as exc:
            return None, exc

    def remember_client(self, ctx: ServerRequestContext[Any], key: str) -> None:
        """Handshake-era clients hear of list changes on their connection: keep a way to reach them."""
        self.callers.remember(ctx, key)


def error_result(message: str, execution_id: str | None = None) -> types.CallToolResult:
    result = types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
    if execution_id:
        result.meta = {EXECUTION_META_KEY: execution_id}
    return result


def _meta_dict(meta: Any) -> dict[str, Any] | None:
    if meta is None:
        return None
    if isinstance(meta, Mapping):
        return dict(meta)
    dumped: dict[str, Any] = meta.model_dump(by_alias=True, exclude_none=True)
    return dumped


# -- the handlers: plain functions of the request context, whose lifespan context is the running app --


async def on_list_tools(
    ctx: ServerRequestContext[Toolwise], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    app = ctx.lifespan_context
    app.watch_connection(ctx, client_key(ctx))
    app.remember_client(ctx, app.learning.sessions.resolve(None, None, client_key(ctx)))
    await app.first_started()  # a list without a downstream still starting would not be refreshed by all
    return types.ListToolsResult(tools=app.list_tools(client_key(ctx)))


async def on_call_tool(
    ctx: ServerRequestContext[Toolwise], params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    """Every tools/call: one of our tools, or a proxied one. Errors become `is_error` results here."""
    app = ctx.lifespan_context
    meta = _meta_dict(params.meta)
    client = client_key(ctx)
    app.watch_connection(ctx, client)
    try:
        name, arguments = app.target(params.name, params.arguments)
        own = app.own.get(name)
        if own is not None:
            return await call_own(app, own, arguments or {}, meta, ctx)
        rounds = InputRound(params.input_responses, params.request_state) if modern(ctx) else None
        return await forward(app, name, arguments, meta, ctx, rounds, client)
    except ValidationError as exc:
        return error_result(f"invalid arguments for {params.name}: {describe(exc)}")
    except UserError as exc:  # what the caller got wrong, named
        return error_result(f"{params.name}: {exc}")
    except FeedbackError as exc:  # the store refused in time (unavailable, unusable): said as it is
        log.warning("%s: %s", params.name, exc)
        return error_result(f"{params.name}: {exc}")
    except (SQLAlchemyError, OSError) as exc:
        log.exception("%s: the database failed", params.name)
        return error_result(f"{params.name}: the database is failing: {describe_database_error(exc)}")
    except MCPError:
        raise  # a protocol error (an unknown tool, a refusal the downstream gave): the client's JSON-RPC error
    except Exception:  # a bug: its text stays in the log, as the SDK's tool runner does
        log.exception("%s raised an unexpected exception", params.name)
        return error_result(f"Error executing tool {params.name}")


async def call_own(
    app: Toolwise,
    tool: OwnTool[Any, Any],
    arguments: dict[str, Any],
    meta: dict[str, Any] | None,
    ctx: ServerRequestContext[Toolwise],
) -> types.CallToolResult:
    args = tool.input.model_validate(arguments)
    try:
        if tool.waits or app.learning.pending > STALE_CALLS or app.learning.settings.seed is not None:
            # what our tools report or change includes every call made so far; a recommendation reads the
            # learned state as it is (a call is learned within IDLE_DRAIN_S), unless a seed asks for
            # decisions that replay exactly, or the calls pending are many
            await app.learning.drain()
    except StoreUnavailableError as exc:
        if tool.uses_store:
            raise
        log.warning("%s answers from memory: %s", tool.name, exc)  # stats say the store is failing
    sessions = app.learning.sessions
    named = getattr(args, "session_id", None)
    owner = app.callers.principal(ctx)  # a session named is this client's: another's is never reached
    key = sessions.resolve(named, meta, sessions.current(client_key(ctx)), owner)
    if named or key != sessions.current(client_key(ctx)):  # a conversation named: the connection is in it
        sessions.name(client_key(ctx), key)
    if tool.takes_session:
        session = sessions.get(key, owner)
        session.seen_on(client_key(ctx) or key)  # no connection (2026-07-28 HTTP): the session's own
    else:
        session = Session(key, owner=owner)  # a tool that takes no session is given one of its own, never kept
    output = await tool.handler(app.services, args, session)
    if tool.name in DECIDING and session.decision is not None:
        await app.decided(ctx, client_key(ctx), session.decision)
        if app.tracing is not None:
            recommended(session.decision.decision_id)
    return types.CallToolResult(content=[types.TextContent(text=output.text())], structured_content=output.structured())


async def forward(
    app: Toolwise,
    name: str,
    arguments: dict[str, Any] | None,
    meta: dict[str, Any] | None,
    ctx: ServerRequestContext[Toolwise],
    rounds: InputRound | None,
    client: str | None,
) -> types.CallToolResult | types.InputRequiredResult:
    """A proxied call: attributed to a session (and the decision it follows), forwarded, noted for
    recording and learning (`LearningService.note`), its result tagged with the execution id. A call
    cancelled on its way (by the client, or its connection closing) is noted as cancelled, then the
    cancellation propagates: nothing recorded is lost, and the drain that records it is not this task.
    A round that ends in `input_required` (2026-07-28) goes back as it is, its decision still open:
    the call is noted once, when its last round answers. `client`: the request's `client_key`, read
    once per call."""
    route = app.catalogue.resolve(name)
    if route is None:  # perhaps a tool of a downstream still starting
        await app.first_started(lambda: app.catalogue.resolve(name) is not None)
        route = app.catalogue.resolve(name)
    if route is None:  # the spec's error for an unknown tool is the protocol's, not a tool result
        raise MCPError(
            INVALID_PARAMS,
            f"Unknown tool: {name!r} (toolwise serves {len(app.list_tools())} tools, see tools/list)",
        )
    owner = app.callers.principal_of(ctx, client)
    fallback = app.learning.sessions.resolve(None, meta, app.learning.sessions.current(client), owner)
    session, opened = app.learning.attribute(name, meta, client or fallback, fallback, owner)
    started_at, start = utcnow(), time.perf_counter()
    stopped: asyncio.CancelledError | None = None
    error: DownstreamError | CallCancelledError | None
    try:
        result, error = await app.call_downstream(route, arguments, ctx, rounds, client)
    except asyncio.CancelledError as cancelled:  # the SDK has told the downstream to stop (a courtesy cancel)
        result, error, stopped = None, None, cancelled
    if isinstance(result, types.InputRequiredResult):
        app.learning.reopen(client or fallback, opened)
        return result
    latency_ms = (time.perf_counter() - start) * 1000
    if stopped is not None:  # recorded as cancelled (nothing awaited on the way), then the cancellation goes on
        error = CallCancelledError(
            f"call to {name} cancelled after {latency_ms:.0f} ms, before {route.server!r} answered "
            "(the client cancelled the request or its connection closed)"
        )
    execution_id = app.learning.note(
        session,
        tool=name,
        server=route.server,
        arguments=arguments,
        outcome=outcome_of(result, error),
        started_at=started_at,
        latency_ms=latency_ms,
        opened=opened,
    )
    if app.tracing is not None:
        execution = session.find(execution_id)
        noted(execution, None if execution is None else app.learning.reward_of(execution))
    if stopped is not None:
        log.info("%s", error)
        raise stopped
    if result is None:
        log.warning("call %s failed after %.0f ms: %s", name, latency_ms, error)
        if isinstance(error, RefusedCallerError):
            raise error.refusal  # the exchange's protocol error, as the downstream gave it (recorded first)
        return error_result(str(error), execution_id)
    # The result was parsed from the downstream's answer for this call alone: tag it in place.
    result.meta = {**(result.meta or {}), EXECUTION_META_KEY: execution_id}
    return result


def build_server(app: Toolwise) -> Server[Toolwise]:
    """The composition root: the MCP server with every handler named (the handlers reach the running
    app as their lifespan context)."""
    passthrough = app.passthrough
    with warnings.catch_warnings():  # logging/setLevel is the handshake era's, still served to it
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server = _Server(  # the overload with on_set_logging_level is deprecated (handshake era)
            "toolwise",
            version=VERSION,
            instructions=INSTRUCTIONS if app.exposure.mode == "all" else INSTRUCTIONS + SEARCH_INSTRUCTIONS,
            lifespan=lambda _server: contextlib.nullcontext(app),
            on_list_tools=on_list_tools,
            on_call_tool=on_call_tool,
            on_subscriptions_listen=passthrough.listen,
            on_list_resources=passthrough.list_resources,
            on_list_resource_templates=passthrough.list_resource_templates,
            on_read_resource=passthrough.read_resource,
            on_subscribe_resource=passthrough.subscribe_resource,
            on_unsubscribe_resource=passthrough.unsubscribe_resource,
            on_list_prompts=passthrough.list_prompts,
            on_get_prompt=passthrough.get_prompt,
            on_completion=passthrough.complete,
            on_set_logging_level=passthrough.callers.set_logging_level,
        )
    server.offered = passthrough.catalogue.capabilities
    # In place of the SDK's span middleware (`Server.middleware`, provisional in the SDK: its TODO L54):
    # ours, a SERVER span per request, when tracing is on; else none.
    server.middleware = middleware(app.tracing)
    return server


class _Server(Server[Toolwise]):
    """Announces `tools.listChanged` to handshake-era clients on every transport (the HTTP session
    manager builds its initialization options itself, without notification options), and besides
    tools only what its downstreams offer (`offered`: the union of their capabilities)."""

    offered: Callable[..., dict[str, Any]] | None = None  # `build_server` sets the catalogue's union

    def get_capabilities(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
        *,
        protocol_version: str | None = None,
    ) -> types.ServerCapabilities:
        if notification_options is None and protocol_version not in MODERN_PROTOCOL_VERSIONS:
            notification_options = NotificationOptions(tools_changed=True)
        caps = super().get_capabilities(
            notification_options, experimental_capabilities, extensions, protocol_version=protocol_version
        )
        handshake = protocol_version not in MODERN_PROTOCOL_VERSIONS
        offered = self.offered(handshake=handshake) if self.offered is not None else {}
        update: dict[str, Any] = {name: None for name in PASSED_THROUGH if name not in offered}
        for name in ("logging", "completions"):
            if name in offered:
                update[name] = offered[name]
        if "resources" in offered and handshake:
            update["resources"] = offered["resources"]
        if "prompts" in offered and handshake:
            update["prompts"] = offered["prompts"]
        return caps.model_copy(update=update)

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True), experimental_capabilities, extensions
        )
