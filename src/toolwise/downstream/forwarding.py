"""One call forwarded to a downstream over its connection (`connection.py`): through its circuit breaker,
within the call's timeout, the request of the caller's era, and its failure said as the error a caller
reads, where which of the downstream's protocol errors are about the caller rather than the server's
health."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
import jsonschema
import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY, REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolwise import sdk
from toolwise.config import HttpServer, ServerSpec, StdioServer
from toolwise.downstream.errors import (
    CircuitOpenError,
    DownstreamError,
    InvalidArgumentsError,
    InvalidResultError,
    RefusedCallerError,
)
from toolwise.downstream.shields import Circuit
from toolwise.downstream.tracing import Tracing


@dataclass(frozen=True, slots=True)
class InputRound:
    """A 2026-07-28 caller's call: a downstream of that era that needs input mid-call answers it with
    `input_required` (its requests and opaque state), which goes back to the caller as it is, and the
    caller's retry brings the responses and the state back. (A handshake-era caller is asked mid-call
    instead: the SDK's client resolves the rounds through the relayed callbacks.)"""

    responses: types.InputResponses | None = None
    state: str | None = None


async def call_tool(
    client: Client,
    tool: str,
    arguments: dict[str, Any] | None,
    timeout_s: float,
    progress: ProgressFnT | None,
    meta: types.RequestParamsMeta | None,
    rounds: InputRound | None,
) -> types.CallToolResult | types.InputRequiredResult:
    """One call; for a 2026-era caller of a 2026-era downstream one round of it, whose input_required
    answer goes back to the caller (`InputRound`), else the whole exchange, resolved by the SDK."""
    if rounds is not None and client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await client.session.call_tool(
            tool,
            arguments,
            timeout_s,
            progress,
            input_responses=rounds.responses,
            request_state=rounds.state,
            meta=meta,
            allow_input_required=True,
        )
    return await client.call_tool(
        tool, arguments, read_timeout_seconds=timeout_s, progress_callback=progress, meta=meta
    )


def answered(server: str, tool: str, exc: MCPError, rounds: InputRound | None) -> DownstreamError | None:
    """The downstream's protocol error when it is about the caller, not the server's health: refused
    arguments, a capability the caller did not declare, a refused retry round (None otherwise)."""
    retry = rounds is not None and (rounds.responses or rounds.state is not None)
    if retry or exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
        return RefusedCallerError(f"{server!r} refused the call of {tool!r}: {exc}", exc)
    if exc.code == INVALID_PARAMS:
        return InvalidArgumentsError(f"{server!r} refused the arguments of {tool!r}: {exc}")
    return None


def transport(spec: ServerSpec) -> str:
    """network.transport of a downstream, as the conventions name it (stdio: a pipe; HTTP: TCP)."""
    if isinstance(spec, StdioServer):
        return "pipe"
    return "tcp" if isinstance(spec, HttpServer) else "inproc"


_TRANSPORT_LOST = (
    ConnectionError,
    EOFError,
    OSError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
)


def is_connection_loss(exc: BaseException) -> bool:
    return (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED) or isinstance(exc, _TRANSPORT_LOST)


class Connected(Protocol):
    """What a call is forwarded over: a downstream's connection (`connection.Downstream`)."""

    name: str
    spec: ServerSpec
    circuit: Circuit
    tracing: Tracing | None

    async def ready_session(self, deadline: float, tool: str, rounds: InputRound | None) -> Client:
        """The connection a call of `tool` goes over, once it is up (until `deadline`, the loop's time)."""
        ...

    def broke(self, client: Client) -> None:
        """A call found `client` closed."""
        ...


async def forward(
    downstream: Connected,
    tool: str,
    arguments: dict[str, Any] | None,
    timeout_s: float,
    meta: types.RequestParamsMeta | None = None,
    progress: ProgressFnT | None = None,
    rounds: InputRound | None = None,
    caller: str | None = None,
) -> types.CallToolResult | types.InputRequiredResult:
    """Forward one call (of the client `caller`) through the circuit breaker. Raises DownstreamError
    when the server is down, dies or is too slow, CircuitOpenError (at once) while its circuit, or
    the caller's own (its timeouts: shields.py), is open."""
    circuit = downstream.circuit
    wait = circuit.admit(time.monotonic(), caller)
    if wait is not None:
        raise CircuitOpenError(_open_circuit(downstream.name, circuit, wait, caller))
    probes = circuit.probes(caller)
    try:
        result = await _call(downstream, tool, arguments, timeout_s, meta, progress, rounds)
    except InvalidArgumentsError:
        circuit.succeeded(caller)  # it answered, and sanely: the caller sent what it cannot take
        raise
    except InvalidResultError:
        circuit.succeeded(caller)  # it answered: the tool's result is wrong, not the server's health
        raise
    except DownstreamError as exc:
        circuit.failed(time.monotonic(), caller, timed_out=exc.timed_out)
        raise
    except BaseException:
        Circuit.abandoned(probes)  # cancelled: no failure; a cancelled probe lets the next call probe
        raise
    circuit.succeeded(caller)
    return result


def _open_circuit(server: str, circuit: Circuit, wait: float, caller: str | None) -> str:
    """Why a call fails fast: the downstream's circuit, or only this client's (its own timeouts)."""
    passing = circuit.state == "closed" or (circuit.state == "half-open" and not circuit.probing)  # not its refusal
    own = circuit.timeouts_of(caller) if passing else None
    if own is not None:
        return (
            f"this client's calls to {server!r} timed out {own} times in a row (call_timeout_s); they "
            f"fail fast for another {max(wait, 0):.0f}s before one is tried again (other clients' calls "
            "go through)"
        )
    return (
        f"downstream server {server!r} failed {circuit.failures} times in a row; its circuit "
        f"is open and calls fail fast for another {max(wait, 0):.0f}s before it is probed again"
    )


async def _call(
    downstream: Connected,
    tool: str,
    arguments: dict[str, Any] | None,
    timeout_s: float,
    meta: types.RequestParamsMeta | None,
    progress: ProgressFnT | None,
    rounds: InputRound | None,
) -> types.CallToolResult | types.InputRequiredResult:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    client = await downstream.ready_session(deadline, tool, rounds)
    server = downstream.name
    try:
        # The SDK's read timeout: armed once the request is written, and on expiry it tells the
        # downstream to stop (notifications/cancelled) before raising REQUEST_TIMEOUT.
        timeout = max(deadline - loop.time(), 0.001)
        if downstream.tracing is None:
            return await call_tool(client, tool, arguments, timeout, progress, meta, rounds)
        with downstream.tracing.client_call(tool, server, client, transport(downstream.spec)) as traced:
            return traced.answered(await call_tool(client, tool, arguments, timeout, progress, meta, rounds))
    except MCPError as exc:
        if exc.code == REQUEST_TIMEOUT:
            raise DownstreamError(
                f"tool {tool!r} on {server!r} did not answer within {timeout_s:g}s (call_timeout_s)",
                timed_out=True,
            ) from None
        raise answered(server, tool, exc, rounds) or _refused(downstream, client, tool, exc) from exc
    except Exception as exc:
        if sdk.is_result_validation_error(exc):
            raise InvalidResultError(
                f"{server!r} answered the call to {tool!r} with a result that breaks its schema: {what_is_wrong(exc)}"
            ) from exc
        raise _refused(downstream, client, tool, exc) from exc


# MCP's content block types, each with the model the SDK parses it into (its union's members in pydantic's errors).
CONTENT_TYPES = {
    "text": "TextContent",
    "image": "ImageContent",
    "audio": "AudioContent",
    "resource_link": "ResourceLink",
    "resource": "EmbeddedResource",
}


def what_is_wrong(refusal: Exception) -> str:
    """The first thing wrong with a result the SDK refused, in one line a client (and the log) can read:
    pydantic's errors are one per member of the content union tried (13 lines and URLs for one block of an
    unknown type), jsonschema's an indented dump of the schema and the instance."""
    if isinstance(refusal, ValidationError):
        return _shape_error(refusal)
    cause = refusal.__cause__
    if isinstance(cause, jsonschema.ValidationError):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in cause.absolute_path)
        return f"structuredContent{where}: {cause.message}"
    return str(refusal).splitlines()[0]


def _shape_error(refusal: ValidationError) -> str:
    """The result's first error, at the path the wire names (a content block of an unknown type said so);
    the errors of the content union's members of other types than the block's are not what is wrong."""
    found = refusal.errors(include_url=False)
    kinds = {  # content block → the type it says it is (an error whose input is the block tells)
        e["loc"][1]: e["input"].get("type")
        for e in found
        if e["loc"][:1] == ("content",) and len(e["loc"]) > 2 and isinstance(e["input"], dict)
    }
    for block, kind in kinds.items():
        if kind not in CONTENT_TYPES:
            which = "no type" if kind is None else f"type {kind!r}, which MCP does not define"
            return f"content[{block}] has {which} ({', '.join(CONTENT_TYPES)})"
    errors = [
        e
        for e in found
        if not (e["loc"][:1] == ("content",) and len(e["loc"]) > 2 and e["loc"][1] in kinds)
        or e["loc"][2] == CONTENT_TYPES[str(kinds[e["loc"][1]])]
    ]
    if not errors:
        return str(refusal).splitlines()[0]
    path = (p for p in errors[0]["loc"] if p not in CONTENT_TYPES.values())
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where or 'the result'}: {errors[0]['msg']}{more}"


def _refused(downstream: Connected, client: Client, tool: str, exc: Exception) -> DownstreamError:
    if is_connection_loss(exc):
        downstream.broke(client)
        return DownstreamError(
            f"downstream server {downstream.name!r} closed the connection during the call; "
            "it is being restarted, the next call will go to the new process"
        )
    return DownstreamError(f"{downstream.name!r} refused the call to {tool!r}: {exc}")
