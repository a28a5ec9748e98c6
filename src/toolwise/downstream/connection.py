"""One downstream server: the task that owns its connection, and the connection its calls are forwarded over
(`forwarding.py`: the circuit breaker, the timeout, the failure said).

The task connects (`targets.py`), lists the tools, serves calls and, when the connection dies, reconnects
with exponential backoff (a stdio process's exit watched, one that does not stop killed: `processes.py`).
Calls never spawn a process. A downstream that cannot start is reported (log + `health()`) and the others
serve.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import SUBSCRIPTION_ID_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolwise import sdk
from toolwise.config import HttpServer, ServerSpec, Settings, StdioServer
from toolwise.downstream.errors import DownstreamError
from toolwise.downstream.failures import (
    JunkReport,
    describe,
    exited,
    recording_spawns,
    refused_why,
    untagged_reporter,
)
from toolwise.downstream.forwarding import InputRound
from toolwise.downstream.listing import all_tools
from toolwise.downstream.processes import STOP_S, kill_spawned, watch_exit
from toolwise.downstream.relaying import Relay, listener
from toolwise.downstream.selection import offered
from toolwise.downstream.shields import Circuit, CircuitState
from toolwise.downstream.targets import client_target
from toolwise.downstream.tracing import Tracing
from toolwise.downstream.twin import Twin

log = logging.getLogger(__name__)
LIST_TRIES = 3  # tools/list asked at most this often on a new connection before the start counts as failed

State = Literal["starting", "ready", "restarting", "failed", "stopped"]


def on_listen_stream(message: Any) -> bool:
    """Whether a notification is an event of a `subscriptions/listen` stream (stamped with its id)."""
    params = getattr(message, "params", None)
    meta = getattr(params, "meta", None)
    return isinstance(meta, Mapping) and SUBSCRIPTION_ID_META_KEY in meta


@dataclass(slots=True)
class Health:
    server: str
    state: State
    tools: int
    restarts: int
    error: str | None
    circuit: CircuitState = "closed"
    junk_lines: int = 0  # lines on its stdout that were not JSON-RPC (ignored)


@dataclass
class Downstream:
    name: str
    spec: ServerSpec
    settings: Settings
    on_tools: Callable[[], None]
    tools: list[types.Tool] = field(default_factory=list)
    state: State = "starting"
    error: str | None = None
    restarts: int = 0
    _client: Client | None = None
    _ready: asyncio.Event = field(default_factory=asyncio.Event)
    _broken: asyncio.Event = field(default_factory=asyncio.Event)
    _attempted: asyncio.Event = field(default_factory=asyncio.Event)
    _launched: asyncio.Event = field(default_factory=asyncio.Event)  # its process spawned (or attempt over)
    _task: asyncio.Task[None] | None = None
    _spawns: list[Any] = field(default_factory=list)  # the processes of its latest start
    _process: Any = None  # the stdio process of the current connection: its exit status, its death
    _serving: object = None  # the connection being served: a late word about an older one changes nothing
    _up_since: float = 0.0  # when the connection being served came up (monotonic)
    _refusal: str | None = None  # an HTTP downstream's "401 Unauthorized" during the latest attempt
    offered: types.ServerCapabilities | None = None  # what its latest connection declared (None: never up yet)
    relay: Relay | None = None
    twin: Twin | None = None  # the handshake-era connection beside a 2026-07-28 one (`downstream/twin.py`)
    tracing: Tracing | None = None  # a CLIENT span per call when tracing is on (`downstream/tracing.py`)
    circuit: Circuit = field(init=False)
    junk: JunkReport = field(init=False)

    def __post_init__(self) -> None:
        self.circuit = Circuit(self.settings.circuit_failures, self.settings.circuit_cooldown_s)
        self.junk = JunkReport(self.name)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"toolwise-downstream-{self.name}")
        if not isinstance(self.spec, StdioServer):
            self._launched.set()  # no process to spawn: it is up or not, whatever else starts meanwhile

    async def wait_first_attempt(self) -> None:
        await self._attempted.wait()

    @property
    def first_start_over(self) -> bool:
        """Its first start has ended: it came up, or failed (or timed out) once."""
        return self._attempted.is_set()

    async def wait_launched(self) -> None:
        await self._launched.wait()

    @property
    def coming_back(self) -> bool:
        """Down for now but on its way up (starting, or its connection lost and being restarted): a request
        for it is worth waiting for, as a tool call waits (`ready_session`)."""
        return self._client is None and self.state in ("starting", "ready", "restarting")

    def may_offer(self, capability: str) -> bool:
        """Down and coming back, and `capability` (resources, prompts, …) among what it offered when last up, or
        never up yet (not known): what it holds may be asked for meanwhile, and is worth waiting for."""
        return self.coming_back and (self.offered is None or getattr(self.offered, capability, None) is not None)

    async def wait_up(self) -> None:
        """Until its connection is up (the caller bounds the wait)."""
        await self._ready.wait()

    async def aclose(self, *, abandoned: bool = False) -> None:
        """Stop it: its connection closed, its process given STOP_S to end, then killed. `abandoned`: toolwise's
        own start failed (its database): its process, likely still booting, is killed at once (nothing of
        it to save), not waited for and then blamed for not stopping."""
        if self._task is not None:
            self._task.cancel()
            if abandoned:
                kill_spawned(self.name, self._spawns, late=False)
            if not (await asyncio.wait([self._task], timeout=STOP_S))[0]:
                # The SDK stops a stdio server under a shield (close stdin, 2 s, then kill) that a cancel can
                # break into: a process hung in its start is then never killed and its stdout never ends.
                kill_spawned(self.name, self._spawns)
                if not (await asyncio.wait([self._task], timeout=STOP_S))[0]:
                    log.error("downstream %s did not stop within %gs of its process being killed", self.name, STOP_S)
        self.junk.close()
        self.state = "stopped"

    @property
    def client(self) -> Client | None:
        """The live connection, None while (re)starting."""
        return self._client

    def health(self) -> Health:
        return Health(
            self.name, self.state, len(self.tools), self.restarts, self.error, self.circuit.state, self.junk.total
        )

    async def _run(self) -> None:
        backoff = self.settings.restart_backoff_s
        while True:
            self._broken.clear()
            try:
                status = await self._serve_once()
                self.error = "connection lost" if status is None else exited(status)
                log.warning("downstream %s stopped serving: %s", self.name, self.error)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure to connect or serve leads to a restart
                self.error = describe(
                    exc,
                    starting=self.state != "ready",
                    start_timeout_s=self.settings.start_timeout_s,
                    exit_status=None if self._process is None else self._process.returncode,
                )
                if self._refusal is not None:  # the SDK says "Server returned an error response"
                    headers = self.spec.headers if isinstance(self.spec, HttpServer) else None
                    self.error = f"answered {self._refusal}: {refused_why(headers)} ({self.error})"
                log.warning("downstream %s failed: %s", self.name, self.error)
            finally:
                self._client = None
                self._ready.clear()
                self._attempted.set()
                self._launched.set()
            # It had come up and stayed up: start the backoff afresh. One lost as soon as it is up (a stream
            # cut at once, its session refused) is retried ever more slowly, as one that will not start.
            if self.state == "ready" and time.monotonic() - self._up_since >= self.settings.restart_backoff_max_s:
                backoff = self.settings.restart_backoff_s
            # Up once (its tools listed, maybe none: a server of resources or prompts alone): coming back, and what
            # it offered is waited for meanwhile (`may_offer`); never up: failed, retried all the same.
            self.state = "restarting" if self.offered is not None else "failed"
            self.restarts += 1
            log.info("restarting downstream %s in %.1fs", self.name, backoff)
            await asyncio.sleep(backoff)
            backoff = min(2 * backoff, self.settings.restart_backoff_max_s)

    async def _serve_once(self) -> int | None:
        """Connect and serve until the connection breaks; returns the process's exit status if it had
        exited by then (None: still running, or not a process)."""
        self._process = None
        self._serving = serving = object()
        self._refusal = None
        async with contextlib.AsyncExitStack() as stack:
            with recording_spawns(self._launched) as spawned:
                self._spawns = spawned
                try:
                    async with asyncio.timeout(self.settings.start_timeout_s):
                        client = await stack.enter_async_context(
                            Client(
                                client_target(
                                    self.name, self.spec, stack, partial(self._session_lost, serving), self._refused
                                ),
                                mode=self.settings.mode,
                                message_handler=self._on_message,
                                **self._hooks(),
                            )
                        )
                        sdk.keep_declared_capabilities(client)
                        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                            sdk.tolerate_untagged_results(client, untagged_reporter(self.name))
                        await self._first_listing(client)
                finally:
                    self._process = spawned[-1] if spawned else None
            self._client, self.state, self.error, self._up_since = client, "ready", None, time.monotonic()
            self.offered = client.server_capabilities
            self.twin = self._twin_of(client)
            if self.twin is not None:  # up with the first, so what callers of its era are offered is known
                try:
                    await self.twin.client()
                except BaseException:  # stopped meanwhile: the twin too
                    self.twin.close()
                    self.twin = None
                    raise
            self._ready.set()
            self._attempted.set()
            self._launched.set()
            if self.relay is not None:
                self.relay.reconnected(self.name)
            log.info("downstream %s ready: %d tools (%s)", self.name, len(self.tools), client.protocol_version)
            listening = listener(self.name, client, self._tools_changed, self.relay, partial(self.broke, client))
            helpers = [t for t in (listening, watch_exit(self.name, self._process, self._broken.set)) if t is not None]
            try:
                await self._broken.wait()
                return None if self._process is None else self._process.returncode  # before we stop it
            finally:
                for helper in helpers:
                    helper.cancel()
                if self.twin is not None:
                    self.twin.close()
                    self.twin = None

    def _twin_of(self, client: Client) -> Twin | None:
        """A handshake-era twin of a 2026-07-28 connection, when the downstream can take a second
        connection (HTTP, in-process; a stdio process is one connection)."""
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or isinstance(self.spec, StdioServer):
            return None
        return Twin(
            self.name,
            partial(client_target, self.name, self.spec),
            self._hooks(),
            self._relayed,
            self.settings.start_timeout_s,
            on_lost=self._twin_lost,
        )

    def _twin_lost(self) -> None:
        if self.relay is not None:
            self.relay.reconnected(self.name, twin=True)

    def _hooks(self) -> dict[str, Any]:
        return self.relay.client_callbacks(self.name) if self.relay is not None else {}

    async def _relayed(self, message: Any) -> None:
        if self.relay is not None:
            await self.relay.notified(self.name, message)

    async def session(self, *, handshake: bool, tool: str | None = None) -> Client | None:
        """The connection for a request of a handshake-era (or 2026-era) caller: the handshake-era
        twin for the former when there is one (and it lists `tool`), else the main one (None: down)."""
        twin = self.twin if handshake else None
        if (
            twin is not None
            and (client := twin.current or await twin.client())
            and (tool is None or tool in twin.tools)
        ):
            return client
        return self._client

    def _handshake_now(self, tool: str) -> Client | None:
        """`session`'s connection for a handshake-era caller of `tool` when it needs no wait: the main
        connection up and its twin open (or refused); else None (`session` waits, bounded by the call's
        timeout). A call asks on every call: no timer armed and cancelled, no coroutine made for it."""
        twin = self.twin
        if self._client is None or twin is None:
            return None
        if twin.current is not None:
            return twin.current if tool in twin.tools else self._client
        return self._client if twin.refused is not None else None

    def connection(self, *, handshake: bool) -> Client | None:
        """The connection a caller of that era is served on, as it is now (nothing is opened)."""
        twin = self.twin.current if handshake and self.twin is not None else None
        return twin or self._client

    def _refused(self, status: str) -> None:
        """The HTTP downstream refused a request for want of a token (`targets.py`): said when it fails."""
        self._refusal = status

    def _session_lost(self, serving: object) -> None:
        """The HTTP downstream no longer knows this connection's session (`targets.py`): a new one is made."""
        if self._serving is serving and not self._broken.is_set():
            log.warning("downstream %s no longer knows toolwise's session (it restarted?): reconnecting", self.name)
            self._lost()

    def _lost(self) -> None:
        """The connection is known dead: calls from now on wait for the new one."""
        self._client = None
        self._ready.clear()
        self._broken.set()

    async def _on_message(self, message: Any) -> None:
        """Handshake-era notifications: a tool-list change triggers a refresh; a transport error marks
        the connection broken so the owner task reconnects. An event of a 2026-07-28 listen stream, which the
        SDK hands here too, is its listener's (`relaying.py`, `subscriptions.py`): relayed here as well, each
        change reached the clients twice."""
        if on_listen_stream(message):
            return
        if isinstance(message, types.ToolListChangedNotification) and self._client is not None:
            await self._tools_changed(self._client)
        elif isinstance(message, ValueError):  # a line that is not JSON-RPC: the connection itself is fine
            self.junk.add(message)
        elif isinstance(message, Exception):
            log.warning("downstream %s transport error: %s", self.name, message)
            self._broken.set()
        else:
            await self._relayed(message)

    async def _refresh(self, client: Client) -> None:
        self.tools = offered(self.name, self.spec, await all_tools(client))
        self.on_tools()

    async def _first_listing(self, client: Client) -> None:
        """Its tools, once connected; a tools/list answered with an error (a server loading its plugins as it
        starts) asked again on this connection, `LIST_TRIES` times in all, `restart_backoff_s` apart (doubling),
        within the start's `start_timeout_s`: a restart of the process for it left its tools out of the first
        tools/list a client took, which some clients never refresh."""
        wait = self.settings.restart_backoff_s
        for _ in range(LIST_TRIES - 1):
            try:
                await self._refresh(client)
            except MCPError as exc:
                log.info("downstream %s: its tools/list failed (%s); asking again in %.1fs", self.name, exc, wait)
            else:
                return
            await asyncio.sleep(wait)
            wait = min(2 * wait, self.settings.restart_backoff_max_s)
        await self._refresh(client)

    async def _tools_changed(self, client: Client) -> None:
        """The downstream said its tools changed: listed anew. A list that fails (it is reloading) keeps the
        tools it had, said naming it; the changes it announces next are listened for all the same."""
        try:
            await self._refresh(client)
        except Exception as exc:  # noqa: BLE001 - one failed listing must not end the stream of its changes
            log.warning(
                "downstream %s: listing its tools after a change failed (%s); its tools as before", self.name, exc
            )

    async def ready_session(self, deadline: float, tool: str, rounds: InputRound | None) -> Client:
        """The connection a call of `tool` goes over, waiting (until `deadline`, the loop's time) while the
        downstream restarts; DownstreamError when it is not running by then."""
        if self._client is not None and self._process is not None and self._process.returncode is not None:
            self._lost()  # it died since the last call: this one goes to the new process
        # Connected, and the twin (if any) open or refused: `session` would answer at once, with no wait to bound.
        client = self._client if self.twin is None or rounds is not None else self._handshake_now(tool)
        try:
            if client is None:
                async with asyncio.timeout_at(deadline):  # a restart counts against the call's timeout
                    if self._client is None:
                        await self._ready.wait()
                    client = await self.session(handshake=rounds is None, tool=tool)  # a handshake-era caller's era
        except TimeoutError:
            raise DownstreamError(
                f"downstream server {self.name!r} is not running ({self.state}: {self.error}); "
                "it is being restarted, try again shortly"
            ) from None
        if client is None:
            raise DownstreamError(f"downstream server {self.name!r} is not running; it is being restarted")
        return client

    def broke(self, client: Client) -> None:
        """A call found `client` closed: if calls still go over it (or its twin), the owner task reconnects
        and calls from now on wait for the new connection (one that came up since is left alone)."""
        twin = self.twin.current if self.twin is not None else None
        if client is self._client or client is twin:
            self._lost()
