"""Running the same server over stdio or streamable HTTP; the CLI picks one, handlers never know."""

from __future__ import annotations

import logging

import uvicorn
from mcp.server.stdio import stdio_server
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp

from toolwise.server.app import Toolwise, build_server
from toolwise.server.auth import BearerAuth, http_access
from toolwise.server.config import AppConfig
from toolwise.server.events import RETRY_MS, MemoryEventStore

log = logging.getLogger(__name__)


async def serve_stdio(config: AppConfig) -> None:
    """One client on stdin/stdout (how Claude Desktop starts a server)."""
    async with Toolwise(config) as app:
        server = build_server(app)
        async with stdio_server() as (read, write):
            log.info("toolwise serving %d tools on stdio", len(app.list_tools()))
            await server.run(read, write, server.create_initialization_options())


async def serve_http(config: AppConfig, host: str, port: int) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp (several clients, one learner), Prometheus metrics at
    /metrics; both behind the bearer token, if any, and the Host/Origin checks. Raises ConfigError
    (before anything starts) for a non-loopback bind without a token."""
    access = http_access(host, config.toolwise)
    async with Toolwise(config) as app:
        server = build_server(app)
        starlette = server.streamable_http_app(
            host=host, transport_security=access.security, event_store=MemoryEventStore(), retry_interval=RETRY_MS
        )

        async def metrics(request: Request) -> Response:
            refused = await access.check_metrics(request)
            return refused or Response(app.metrics.render(), media_type=CONTENT_TYPE_LATEST)

        starlette.add_route("/metrics", metrics, methods=["GET"])
        asgi: ASGIApp = starlette if access.token is None else BearerAuth(starlette, access.token)
        uv = uvicorn.Server(uvicorn.Config(asgi, host=host, port=port, log_config=None, lifespan="on"))
        log.info("toolwise serving %d tools at http://%s:%d/mcp", len(app.list_tools()), host, port)
        await uv.serve()
