"""One call forwarded to a downstream: the request of the caller's era, and which of the downstream's
protocol errors are about the caller rather than the server's health."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise.config import HttpServer, ServerSpec, StdioServer
from toolwise.downstream.errors import DownstreamError, InvalidArgumentsError, RefusedCallerError


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
