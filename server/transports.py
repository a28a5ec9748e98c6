"""Running the same server over stdio or streamable HTTP; the CLI picks one, handlers never know."""

from __future__ import annotations

import asyncio
import logging
import signal

import anyio
import uvicorn
from mcp.server.stdio import stdio_server
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from toolwise.server.app import Toolwise, build_server
from toolwise.server.config import AppConfig

log = logging.getLogger(__name__)


async def serve_stdio(config: AppConfig) -> None:
    """One client on stdin/stdout (how Claude Desktop starts a server)."""
    async with Toolwise(config) as app:
        server = build_server(app)
        with anyio.CancelScope() as serving:
            _stop_on_sigterm(serving)
            async with stdio_server() as (read, write):
                log.info("toolwise serving %d tools on stdio", len(app.list_tools()))
                await server.run(read, write, server.create_initialization_options())


def _stop_on_sigterm(serving: anyio.CancelScope) -> None:
    """SIGTERM (a client's next step when closing stdin did not stop us in time) ends serving and runs
    the ordinary shutdown, snapshot first; once shutting down, a SIGTERM no longer interrupts it."""

    def stop() -> None:
        log.info("SIGTERM: stopping" if not serving.cancel_called else "SIGTERM while stopping: finishing")
        serving.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop)


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
