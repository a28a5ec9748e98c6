"""The dashboard's HTTP side: the route of `serve --http` (`endpoint`) and the app `toolwise dashboard`
serves alone (`serve_dashboard`). What it shows is gathered by server/dashboard.py and drawn by
server/dashboard_page.py."""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from toolwise.feedback import FeedbackError
from toolwise.feedback.errors import describe_database_error
from toolwise.feedback.failures import DATABASE_FAILURES
from toolwise.server.auth import DASHBOARD, redact_access_log
from toolwise.server.dashboard import Query, gather
from toolwise.server.dashboard_page import main_part, page

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from toolwise.config import Settings
    from toolwise.feedback import FeedbackService
    from toolwise.server.auth import HttpAccess

log = logging.getLogger(__name__)


def endpoint(
    feedback: FeedbackService, namespace: str, database_url: str, access: HttpAccess
) -> Callable[[Request], Awaitable[Response]]:
    """The route's handler: the whole page, or (`?part=main`) the part an open page fetches to stay live;
    Host/Origin checked as for /mcp (the token, by `BearerAuth` in front). A database that fails is a 503
    naming its error."""

    async def dashboard(request: Request) -> Response:
        refused = await access.check_metrics(request)
        if refused is not None:
            return refused
        try:
            query = Query.of(request)
        except ValueError as exc:
            return PlainTextResponse(f"toolwise dashboard: {exc}\n", status_code=400)
        try:
            view = await gather(feedback, namespace, database_url, query)
        except DATABASE_FAILURES as exc:  # the user's situation, not a bug: said, no traceback
            said = str(exc) if isinstance(exc, FeedbackError) else describe_database_error(exc)
            log.warning("dashboard: the database is failing: %s", said)
            return PlainTextResponse(f"toolwise dashboard: the database is failing: {said}\n", status_code=503)
        html = main_part(view, query) if request.query_params.get("part") == "main" else page(view, query)
        return HTMLResponse(html, headers={"Cache-Control": "no-store"})

    return dashboard


def dashboard_app(feedback: FeedbackService, namespace: str, database_url: str, access: HttpAccess) -> ASGIApp:
    """An ASGI app that serves the dashboard alone, behind the token, if any, and the Host/Origin checks."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    from toolwise.server.auth import BearerAuth

    app = Starlette(routes=[Route(DASHBOARD, endpoint(feedback, namespace, database_url, access), methods=["GET"])])
    return app if access.token is None else BearerAuth(app, access.token)


async def serve_dashboard(settings: Settings, host: str, listening: socket.socket, access: HttpAccess) -> None:
    """`toolwise dashboard`: the dashboard alone on `listening` (`transports.listening_socket`'s), over
    the database of `settings`, without serving MCP."""
    import uvicorn

    from toolwise.feedback import FeedbackService

    redact_access_log()
    async with FeedbackService(settings.database_url) as feedback:
        app = dashboard_app(feedback, settings.namespace, settings.database_url, access)
        port = listening.getsockname()[1]
        uv = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_config=None, lifespan="off"))
        await uv.serve(sockets=[listening])
