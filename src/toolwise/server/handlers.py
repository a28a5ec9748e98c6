"""The handlers of tools/list and tools/call: plain module-level functions that reach the running app as
their lifespan context, so a test can drive them through `Client(build_server(app))` (`server/build.py`
names them). Errors become `is_error` results in one place: `on_call_tool`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types
from mcp.server import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ValidationError
from sqlalchemy.exc import SQLAlchemyError

from toolwise.config import describe
from toolwise.downstream.callers import client_key, modern
from toolwise.downstream.errors import CallCancelledError, DownstreamError, RefusedCallerError
from toolwise.downstream.forwarding import InputRound
from toolwise.downstream.naming import meant_name
from toolwise.downstream.outcome import outcome_of
from toolwise.errors import UserError
from toolwise.feedback import FeedbackError, StoreUnavailableError, utcnow
from toolwise.feedback.errors import describe_database_error
from toolwise.learning.sessions import EXECUTION_META_KEY, Session
from toolwise.server.app import Toolwise
from toolwise.server.discovery import CALL_TOOL, SEARCH_TOOLS, CallToolInput
from toolwise.server.own import OwnTool
from toolwise.server.tracing import noted, recommended

log = logging.getLogger(__name__)
STALE_CALLS = 64  # calls a recommendation may read the learned state without (beyond: it waits for one run of them)
DECIDING = ("recommend_tool", SEARCH_TOOLS)  # own tools whose answer is a decision (learned exposure)


def error_result(message: str, execution_id: str | None = None) -> types.CallToolResult:
    result = types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)
    if execution_id:
        result.meta = {EXECUTION_META_KEY: execution_id}
    return result


def _meta_dict(meta: Any) -> dict[str, Any] | None:
    if meta is None:
        return None
    if isinstance(meta, dict | Mapping):  # a dict (the SDK's TypedDict) without the ABC's slower check
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
    name = params.name  # the tool called: call_tool's until its own arguments name another
    try:
        name, arguments = app.target(name, params.arguments)
        own = app.own.get(name)
        if own is not None:
            return await call_own(app, own, arguments or {}, meta, ctx, client)
        rounds = InputRound(params.input_responses, params.request_state) if modern(ctx) else None
        return await forward(app, name, arguments, meta, ctx, rounds, client)
    except ValidationError as exc:
        return error_result(f"invalid arguments for {name}: {describe(exc, known=argument_names(app, name))}")
    except UserError as exc:  # what the caller got wrong, named
        return error_result(f"{name}: {exc}")
    except FeedbackError as exc:  # the store refused in time (unavailable, unusable): said as it is
        log.warning("%s: %s", name, exc)
        return error_result(f"{name}: {exc}")
    except (SQLAlchemyError, OSError) as exc:
        log.exception("%s: the database failed", name)
        return error_result(f"{name}: the database is failing: {describe_database_error(exc)}")
    except MCPError:
        raise  # a protocol error (an unknown tool, a refusal the downstream gave): the client's JSON-RPC error
    except Exception:  # a bug: its text stays in the log, as the SDK's tool runner does
        log.exception("%s raised an unexpected exception", name)
        return error_result(f"Error executing tool {name}")


async def call_own(
    app: Toolwise,
    tool: OwnTool[Any, Any],
    arguments: dict[str, Any],
    meta: dict[str, Any] | None,
    ctx: ServerRequestContext[Toolwise],
    client: str | None,
) -> types.CallToolResult:
    """One of toolwise's own tools, in the caller's session. `client`: the request's `client_key`, read
    once per call (as `forward` does)."""
    args = tool.input.model_validate(arguments)
    await app.learning.catalogue_listed()  # a start lists its first catalogue beside the loop: every tool
    try:
        if tool.waits or app.learning.settings.seed is not None:
            # what our tools report or change includes every call made so far; so does a decision under a
            # seed (decisions that replay exactly), which is not the prior's while a start catches up either
            if not tool.waits:
                await app.learning.until_caught_up()
            await app.learning.drain()
        elif not app.learning.loading:  # none is learned before the load: meanwhile it answers from the prior
            # a recommendation reads the learned state as it is (a call is learned within LATEST_S), unless
            # more than STALE_CALLS calls wait: then it waits for one run of the older ones (`caught_up`)
            await app.learning.caught_up(STALE_CALLS)
    except StoreUnavailableError as exc:
        if tool.uses_store:
            raise
        log.warning("%s answers from memory: %s", tool.name, exc)  # stats say the store is failing
    sessions = app.learning.sessions
    named = getattr(args, "session_id", None)
    owner = app.callers.principal_of(ctx, client)  # a session named is this client's: another's is never reached
    current = sessions.current(client)
    key = sessions.resolve(named, meta, current, owner)
    if named or key != current:  # a conversation named: the connection is in it
        sessions.name(client, key)
    if tool.takes_session:
        session = sessions.get(key, owner)
        session.seen_on(client or key)  # no connection (2026-07-28 HTTP): the session's own
    else:
        session = Session(key, owner=owner)  # a tool that takes no session is given one of its own, never kept
    output = await tool.handler(app.services, args, session)
    if tool.name in DECIDING and session.decision is not None:
        await app.decided(ctx, client, session.decision)
        if app.tracing is not None:
            recommended(session.decision.decision_id)
    return types.CallToolResult(content=[types.TextContent(text=output.text())], structured_content=output.structured())


def argument_names(app: Toolwise, name: str) -> list[str]:
    """The arguments toolwise's own tool `name` (or call_tool) takes, for the hint of an unknown one: not
    the config file's keys, which `describe` looks among otherwise."""
    if name == CALL_TOOL:
        return list(CallToolInput.model_fields)
    own = app.own.get(name)
    return [] if own is None else list(own.input.model_fields)


def unknown_tool(app: Toolwise, name: str) -> MCPError:
    """A tool toolwise does not serve: the server that listed it and no longer does or is down, the name it stands for
    (`time__convert_time` for a downstream's own `convert_time`) or the near miss of a misspelt name, and where
    the others are (with `exposure` other than `all`, tools/list holds a few of them: search_tools finds the rest)."""
    served = [*app.catalogue.routes, *app.own]
    near = meant_name(name, served)
    where = "see tools/list" if app.exposure.mode == "all" else "search_tools finds them"
    return MCPError(
        INVALID_PARAMS,
        f"Unknown tool: {name!r} ({whose(app, name)}{f'did you mean {near!r}? ' if near else ''}toolwise serves "
        f"{len(served)} tools, {where})",
    )


def whose(app: Toolwise, name: str) -> str:
    """What became of the downstream an unlisted `name` would be a tool of: it removed the tool, or it is not
    up (its tools are unlisted until it is); "" when neither."""
    server = app.catalogue.gone.get(name)
    if server is not None:
        return f"its server {server!r} no longer lists it; "
    downstream = app.catalogue.carrier(name)
    if downstream is None or downstream.state == "ready":
        return ""
    return f"its server {downstream.name!r} is not up: {downstream.state}, {downstream.error}; try again shortly; "


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
        raise unknown_tool(app, name)
    owner = app.callers.principal_of(ctx, client)
    fallback = app.learning.sessions.resolve(None, meta, app.learning.sessions.current(client), owner)
    session, opened = app.learning.attribute(name, meta, client or fallback, fallback, owner)
    started_at, start = utcnow(), time.perf_counter()
    stopped: asyncio.CancelledError | None = None
    error: DownstreamError | CallCancelledError | None
    try:
        result, error = await app.call_downstream(route, arguments, ctx, rounds, client, owner)
    except asyncio.CancelledError as cancelled:  # the SDK has told the downstream to stop (a courtesy cancel)
        result, error, stopped = None, None, cancelled
    if isinstance(result, types.InputRequiredResult):
        app.learning.reopen(client or fallback, opened)
        return result
    latency_ms = (time.perf_counter() - start) * 1000
    if stopped is not None:  # recorded as cancelled (nothing awaited on the way), then the cancellation goes on
        error = CallCancelledError(
            f"call to {name} cancelled after {latency_ms:.0f} ms, before {route.server!r} answered "
            "(the client cancelled the request, its connection closed or toolwise shut down)"
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
