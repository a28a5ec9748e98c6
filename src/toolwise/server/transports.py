"""Running the same server over stdio or streamable HTTP; the CLI picks one, handlers never know.

On either, SIGTERM, SIGHUP and SIGINT (Ctrl-C) end serving and run the same clean shutdown as the client
closing stdin: every answered call recorded, a shutdown snapshot stored, exit 0. stdin is read on the
event loop (not in a worker thread blocked in `readline`), so a signal ends serving at once even while
the client keeps stdin open; stdout is written by the event loop too (`_Out`). Over HTTP the calls in
flight get `DRAIN_S` to be answered, then those still running are answered that toolwise is shutting down and
open streams end (`draining.py`): connected clients never hold a shutdown up.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING

import anyio

from toolwise.background import Background
from toolwise.config import AppConfig

if TYPE_CHECKING:
    import uvicorn
    from mcp.server import Server

    from toolwise.server.app import Toolwise

log = logging.getLogger(__name__)


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
MAX_LINE = 1 << 28  # bytes: the longest JSON-RPC message read from stdin (a message is one line) or a POST
DRAIN_S = 3.0  # seconds the HTTP calls in flight get to be answered once a signal says stop


async def serve_stdio(config: AppConfig) -> None:
    """One client on stdin/stdout (how Claude Desktop starts a server). Serving ends when the client
    closes stdin or sends SIGTERM (the SDK's stdio client does so 2 s after closing stdin); either way
    the ordinary shutdown runs, snapshot first."""
    from mcp.server.stdio import stdio_server

    async with ready_to_serve(config) as (app, server):
        app.callers.serve_alone()  # one client: it owns everything recorded, across restarts too
        stdin = await _stdin_lines()
        with anyio.CancelScope() as serving, _stop_on(STOP_SIGNALS, serving.cancel):
            async with (
                _stdout_on_loop() as stdout,
                stdio_server(stdin=stdin, stdout=stdout) as (read, write),  # type: ignore[arg-type]  # _Lines and _Out offer what the SDK reads and writes, not all of AsyncFile
            ):
                log.info("toolwise serving %d tools on stdio", len(app.list_tools()))
                await server.run(read, write, server.create_initialization_options())
        log.info("toolwise shutting down: recording what is left and saving a snapshot")


class Stopped(Exception):
    """A stop signal came while toolwise started: the start was given up, as Ctrl-C gives it up."""


@contextlib.asynccontextmanager
async def ready_to_serve(config: AppConfig) -> AsyncIterator[tuple[Toolwise, Server[Toolwise]]]:
    """The app entered and its MCP server built, ready to serve on any transport: its downstreams
    spawned first (`launched`), what start-up built settled out of the collector's way (server/heap.py).
    A stop signal while it starts (it may wait `start_wait_s` for a downstream) cancels the start and raises
    Stopped once the downstreams are killed; without it the signal's default action ended toolwise alone,
    and a downstream that does not stop when its stdin closes ran on."""
    task = asyncio.current_task()
    assert task is not None
    stopped = False

    def stop() -> None:
        nonlocal stopped
        stopped = True
        task.cancel()  # once, as asyncio.run does on Ctrl-C: the start's own cleanup still awaits what it must

    async with contextlib.AsyncExitStack() as stack:
        try:
            with _stop_on(STOP_SIGNALS, stop):
                app = await launched(config)
                await stack.enter_async_context(app)
        except BaseException:  # the cancellation, or what a start cut short raised instead
            if not stopped:
                raise
            task.uncancel()
            raise Stopped from None
        from toolwise.server.build import build_server

        yield app, build_server(app)


async def launched(config: AppConfig) -> Toolwise:
    """A Toolwise whose downstreams' processes were spawned before the rest of toolwise was imported:
    a downstream's boot (a Python server's own imports) then overlaps the rest of our imports and the
    opening of the database instead of preceding them. Enter it to serve."""
    from toolwise.downstream.catalogue import Catalogue
    from toolwise.downstream.passthrough import Passthrough
    from toolwise.server.tracing import from_environment

    catalogue = Catalogue(config.enabled_servers, config.toolwise, from_environment())  # OTEL_*: traced or not
    passthrough = Passthrough.serving(catalogue)  # what each connection declares, before it connects
    try:
        await catalogue.launch()
        from toolwise.server.app import Toolwise  # imported while they boot

        return Toolwise(config, passthrough)
    except BaseException:
        await catalogue.aclose(abandoned=True)
        raise


@contextlib.contextmanager
def _stop_on(signals: tuple[signal.Signals, ...], stop: Callable[[], object]) -> Iterator[None]:
    """While inside, the first of `signals` calls `stop` (a second signal only says so)."""
    loop = asyncio.get_running_loop()
    stopping = False

    def on_signal(sig: signal.Signals) -> None:
        nonlocal stopping
        if stopping:
            log.warning("%s: already shutting down", sig.name)
            return
        stopping = True
        log.info("%s received: stopping", sig.name)
        stop()

    for sig in signals:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


class _Lines:
    """stdin's lines, read by the event loop (a cancellation ends the wait at once)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


async def _stdin_lines() -> _Lines | None:
    """stdin as lines read on the event loop when it is a pipe, socket or terminal (what a client
    gives); None otherwise (a file, /dev/null: the SDK's own reader serves it, and it ends by itself)."""
    fd = sys.stdin.fileno()
    mode = os.fstat(fd).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
        return None
    reader = asyncio.StreamReader(limit=MAX_LINE)
    pipe = os.fdopen(os.dup(fd), "rb", buffering=0)
    await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    return _Lines(reader)


class _Out:
    """stdout written by the event loop. The SDK's own writer hands each answer's write, then its flush, to a
    worker thread: two round trips between threads per answer, each waiting for the GIL at both ends (and so
    for the learning thread while it holds it)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))  # written at once while the pipe takes it, else queued

    async def flush(self) -> None:
        await self._writer.drain()  # waits only while the client reads slower than we answer


@contextlib.asynccontextmanager
async def _stdout_on_loop() -> AsyncIterator[_Out | None]:
    """stdout as a pipe the event loop writes, when it is a pipe or socket (what a client gives); None otherwise
    (a terminal, a file, Windows: the SDK's own writer serves it). As the SDK's claim of stdout does, fd 1 points at
    stderr meanwhile, so that stray output of handlers and children misses the wire; it is the wire again after."""
    try:
        fd = sys.stdout.fileno()
        mode = os.fstat(fd).st_mode
    except (AttributeError, OSError, ValueError):  # replaced by an object without a descriptor
        yield None
        return
    if sys.platform == "win32" or not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)):
        yield None
        return
    import fcntl  # POSIX only

    wire = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)  # above the standard three, not inherited by children
    os.dup2(2, fd)  # stderr's descriptor, as the SDK's diversion takes it
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(wire, "wb", buffering=0)
    )
    try:
        yield _Out(asyncio.StreamWriter(transport, protocol, None, loop))
    finally:
        os.dup2(wire, fd)
        transport.close()


class BindError(Exception):
    """The HTTP port cannot be listened on (in use, not allowed); the message names it and what to do."""


def listening_socket(host: str, port: int) -> socket.socket:
    """HOST:PORT bound before anything starts, so that a busy port is one line naming it rather than
    uvicorn's error after toolwise announced it was serving. Uvicorn serves on this socket."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise BindError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pass --host with an address of this machine"
        ) from exc
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: a restart reuses the port at once
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BindError(
                f"port {port} on {host} is already in use (another toolwise or server is listening there): "
                "stop it, or pass --port with a free port"
            ) from exc
        raise BindError(f"cannot listen on {host}:{port}: {exc.strerror}; pass another --host or --port") from exc
    return sock


async def serve_http(config: AppConfig, host: str, listening: socket.socket) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp (several clients, one learner), Prometheus metrics at
    /metrics, the dashboard at /dashboard; all behind the bearer token, if any, and the Host/Origin
    checks; /healthz outside them (`health.py`). Raises ConfigError (before anything starts) for a
    non-loopback bind without a token.
    `listening`: `listening_socket`'s."""
    import uvicorn
    from prometheus_client import CONTENT_TYPE_LATEST
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp

    from toolwise.server.abandoned import Abandoned
    from toolwise.server.auth import DASHBOARD, BearerAuth, http_access, redact_access_log, shown_host
    from toolwise.server.dashboard_http import endpoint
    from toolwise.server.draining import Draining
    from toolwise.server.events import RETRY_MS, MemoryEventStore
    from toolwise.server.health import HEALTH_PATHS, health_route

    access = http_access(host, config.toolwise)
    redact_access_log()
    async with ready_to_serve(config) as (app, server):
        starlette = server.streamable_http_app(
            host=host,
            transport_security=access.security,
            event_store=MemoryEventStore(),
            retry_interval=RETRY_MS,
            max_request_body_size=MAX_LINE,  # a message as large as stdin takes (the SDK's default: 4 MiB)
        )

        async def metrics(request: Request) -> Response:
            refused = await access.check_metrics(request)
            return refused or Response(await app.metrics.render(), media_type=CONTENT_TYPE_LATEST)

        starlette.add_route("/metrics", metrics, methods=["GET"])
        dashboard = endpoint(app.feedback, app.learning.namespace, config.toolwise.database_url, access)
        starlette.add_route(DASHBOARD, dashboard, methods=["GET"])
        healthz = health_route(app.catalogue.health, lambda: app.feedback.stats)
        for path in HEALTH_PATHS:
            starlette.add_route(path, healthz, methods=["GET"])  # no token: health.py
        draining = Draining(Abandoned(starlette))
        server.middleware.append(draining.cut_on_close)  # innermost: a request cut is still traced
        asgi: ASGIApp = (
            draining if access.token is None else BearerAuth(draining, access.token, open_paths=HEALTH_PATHS)
        )
        port = listening.getsockname()[1]
        # DRAIN_S, then a second for the streams to end: uvicorn cancels what is left, then toolwise shuts down.
        settings = uvicorn.Config(
            asgi, host=host, port=port, log_config=None, lifespan="on", timeout_graceful_shutdown=int(DRAIN_S) + 1
        )
        uv = _without_signal_handlers(settings)
        stopping = Background()

        def stop() -> None:
            uv.should_exit = True  # uvicorn stops accepting, closes idle connections, waits for the others
            stopping.spawn(draining.close(DRAIN_S), name="toolwise-drain", failure="draining the HTTP requests failed")

        log.info("toolwise serving %d tools at http://%s:%d/mcp", len(app.list_tools()), shown_host(host), port)
        with _stop_on(STOP_SIGNALS, stop):
            await uv.serve(sockets=[listening])
        log.info("toolwise shutting down: recording what is left and saving a snapshot")


def _without_signal_handlers(settings: uvicorn.Config) -> uvicorn.Server:
    """A uvicorn server that leaves the signals to toolwise (`_stop_on`): its own handlers re-raise the
    signal once uvicorn has shut down, which kills the process before toolwise's shutdown runs (exit -15,
    no snapshot, the instance never marked stopped, downstreams left behind)."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    return Server(settings)
