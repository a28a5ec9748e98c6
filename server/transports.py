"""Running the same server over stdio or streamable HTTP; the CLI picks one, handlers never know."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from toolwise.server.app import Toolwise, build_server
from toolwise.server.config import AppConfig

log = logging.getLogger(__name__)


async def serve_stdio(config: AppConfig) -> None:
    """One client on stdin/stdout (how Claude Desktop starts a server). Serving ends when the client
    closes stdin or sends SIGTERM (the SDK's stdio client does so 2 s after closing stdin); either way
    the ordinary shutdown runs, snapshot first."""
    terminated = asyncio.Event()
    async with Toolwise(config) as app:
        server = build_server(app)
        ended = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: (terminated.set(), ended.set()))
        serving = asyncio.create_task(_serve_stdio(server, app), name="toolwise-stdio")
        serving.add_done_callback(lambda _: ended.set())
        await ended.wait()
        if serving.done():
            serving.result()  # a transport failure is raised, not swallowed
        else:
            serving.cancel()  # not awaited: its thread stays blocked reading stdin until the process ends
    if terminated.is_set():
        # The shutdown is done (snapshot, records flushed, downstreams closed); the stdin reader's thread
        # cannot be interrupted, so leave without waiting for it, as SIGTERM asks.
        log.info("toolwise stopped (SIGTERM)")
        logging.shutdown()
        os._exit(0)


async def _serve_stdio(server: Server[Any], app: Toolwise) -> None:
    async with stdio_server() as (read, write):
        log.info("toolwise serving %d tools on stdio", len(app.list_tools()))
        await server.run(read, write, server.create_initialization_options())


async def serve_http(config: AppConfig, host: str, port: int) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp (several clients, one learner), Prometheus metrics at
    /metrics."""
    async with Toolwise(config) as app:
        server = build_server(app)
        starlette = server.streamable_http_app(host=host)

        async def metrics(request: Request) -> Response:
            return Response(app.metrics.render(), media_type=CONTENT_TYPE_LATEST)

        starlette.add_route("/metrics", metrics, methods=["GET"])
        uv = uvicorn.Server(uvicorn.Config(starlette, host=host, port=port, log_config=None, lifespan="on"))
        log.info("toolwise serving %d tools at http://%s:%d/mcp", len(app.list_tools()), host, port)
        await uv.serve()
