"""Every private part of the MCP SDK toolwise relies on, in one place; tests/server/test_sdk.py pins each
one and fails naming it when an SDK release moves it.

- `session_connection`: `ServerRequestContext` does not expose the per-client `Connection` behind a
  request (the SDK's own `Context.connection` does, but the low-level runner does not build that yet);
  the request's session holds exactly that object as `_connection`.
- `http_client`: the SDK's `create_mcp_http_client` (MCP transports' timeouts, no redirects) lives in
  `mcp.shared._httpx_utils`; the HTTP downstreams and `doctor` need it with their own headers.
- `is_result_validation_error`: the client refuses a tool result that breaks the tool's output schema
  with a plain `RuntimeError` (`ClientSession.validate_tool_result`), told apart only by its message;
  a result that breaks the protocol's shape, with pydantic's `ValidationError`.
- `install_spawn_hook`: the exit status of a stdio downstream is not exposed by `stdio_client`, so the
  spawn function it calls (`mcp.client.stdio._create_platform_compatible_process`) is wrapped to hand
  each process to a callback. Installed explicitly by the catalogue before it starts a downstream;
  without it only the exit status is missing from the reasons a start failed. The wrapper also kills
  a process whose spawn was cancelled before it returned (`kill_group`: the SDK starts each in a
  session of its own), which `stdio_client` never sees and so never stops.
- `tolerate_untagged_results`: a downstream that negotiates 2026-07-28 but answers without the era's
  `resultType` tag (as servers part-way through the upgrade do: the conformance suite's own reference
  server answers `tools/call` so) is refused by the client's validation; the session's raw requests
  (`ClientSession._dispatcher.send_raw_request`) are wrapped to read such an answer as the complete
  result it is, reported once per downstream.
- `keep_declared_capabilities`: on 2026-07-28 the client stamps its own capabilities into every
  request's `_meta` (`ClientSession._stamp`); a proxy must declare what its caller declared, so the
  stamp is wrapped to keep the capabilities the forwarded `_meta` carries (and to drop them towards a
  handshake-era downstream, which learned its client's capabilities at the handshake).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from typing import Any

import mcp.client.stdio as sdk_stdio
from mcp import Client
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.shared._httpx_utils import create_mcp_http_client as http_client
from mcp_types import CLIENT_CAPABILITIES_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

__all__ = [
    "SPAWN_FUNCTION",
    "http_client",
    "install_spawn_hook",
    "is_result_validation_error",
    "keep_declared_capabilities",
    "kill_group",
    "session_connection",
    "tolerate_untagged_results",
]

log = logging.getLogger(__name__)

SPAWN_FUNCTION = "_create_platform_compatible_process"
RESULT_REFUSALS = (  # ClientSession.validate_tool_result's messages
    "Invalid structured content returned by tool ",
    "Invalid schema for tool ",
    " has an output schema but did not return structured content",
)
_installed: list[Callable[[Any], None]] = []


def session_connection(session: ServerSession) -> Connection:
    """The `Connection` a server session belongs to; a TypeError naming the SDK change if it moved."""
    connection = getattr(session, "_connection", None)
    if not isinstance(connection, Connection):
        raise TypeError(f"the SDK's ServerSession no longer holds its Connection (got {type(connection).__name__})")
    return connection


def is_result_validation_error(exc: BaseException) -> bool:
    """Whether the SDK's client refused a downstream's answer to a call as invalid (the server answered)."""
    if isinstance(exc, ValidationError):
        return True
    return isinstance(exc, RuntimeError) and any(refusal in str(exc) for refusal in RESULT_REFUSALS)


def install_spawn_hook(on_spawn: Callable[[Any], None]) -> bool:
    """Wrap the SDK's stdio spawn function once so that `on_spawn` gets every process it starts; False
    (and a debug line) when this SDK has no such function. Installing the same callback again is a no-op."""
    if on_spawn in _installed:
        return True
    original = getattr(sdk_stdio, SPAWN_FUNCTION, None)
    if original is None:
        log.debug("mcp.client.stdio has no %s to wrap: exit statuses will not be reported", SPAWN_FUNCTION)
        return False

    async def spawn(*args: Any, **kwargs: Any) -> Any:
        # Shielded: a cancellation (Ctrl-C, a start given up) that lands while the process is being
        # spawned would leave it running, its children too (asyncio kills the process alone, then waits
        # for the pipes its children hold); the spawn ends anyway and what it started is killed.
        spawning = asyncio.ensure_future(original(*args, **kwargs))
        try:
            process = await asyncio.shield(spawning)
        except asyncio.CancelledError:
            spawning.add_done_callback(_kill_abandoned)
            raise
        on_spawn(process)
        return process

    setattr(sdk_stdio, SPAWN_FUNCTION, spawn)
    _installed.append(on_spawn)
    return True


def kill_group(process: Any) -> None:
    """SIGKILL a process the SDK spawned and, on POSIX, its process group: the SDK starts each in a
    session of its own, so a wrapper's children (`npx`, `uvx`) go with it."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile: nothing left to kill
            os.killpg(process.pid, signal.SIGKILL)
    else:
        process.kill()


def _kill_abandoned(spawning: asyncio.Future[Any]) -> None:
    """The process of a spawn whose caller was cancelled before it returned: nobody else will stop it."""
    if not spawning.cancelled() and spawning.exception() is None:
        process = spawning.result()
        log.debug("killing process %d: its spawn was cancelled", process.pid)
        kill_group(process)


def tolerate_untagged_results(client: Client, on_untagged: Callable[[str], None]) -> None:
    """Read an answer with no `resultType` as complete (the tag every 2026-07-28 answer carries and
    earlier eras never send); `on_untagged(method)` hears of the first one. A TypeError naming the SDK
    change if the session's dispatcher moved."""
    dispatcher: Any = getattr(client.session, "_dispatcher", None)
    send = getattr(dispatcher, "send_raw_request", None)
    if dispatcher is None or send is None:
        raise TypeError("the SDK's ClientSession no longer sends through _dispatcher.send_raw_request")
    told = False

    async def tolerant(method: str, params: Any, opts: Any) -> Any:
        nonlocal told
        raw = await send(method, params, opts)
        if isinstance(raw, dict) and "resultType" not in raw:
            raw["resultType"] = "complete"
            if not told:
                told = True
                on_untagged(method)
        return raw

    dispatcher.send_raw_request = tolerant


def keep_declared_capabilities(client: Client) -> None:
    """Requests whose `_meta` carries the caller's declared capabilities go out with those, not the
    connection's own (on 2026-07-28; towards an older downstream the key is dropped). A TypeError
    naming the SDK change if the session's stamp moved."""
    session: Any = client.session
    stamp = getattr(session, "_stamp", None)
    if not callable(stamp):
        raise TypeError("the SDK's ClientSession no longer stamps requests through _stamp")
    modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS

    def declared(data: dict[str, Any], opts: Any) -> None:
        params = data.get("params") or {}
        meta = params.get("_meta")
        theirs = meta.pop(CLIENT_CAPABILITIES_META_KEY, None) if isinstance(meta, dict) else None
        if meta == {}:
            del params["_meta"]  # it carried only the capabilities: as if the caller had sent no _meta
        stamp(data, opts)
        if modern and theirs is not None:
            data["params"]["_meta"][CLIENT_CAPABILITIES_META_KEY] = theirs

    session._stamp = declared
