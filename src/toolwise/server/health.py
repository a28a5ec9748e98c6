"""`GET /healthz` on the HTTP transport: is this toolwise able to proxy, for a load balancer's or
Kubernetes' probe.

200 while at least one downstream is ready (`"status": "ok"` when all are, `"degraded"` when some are
not: toolwise serves the others), 503 when none is (or there are none to proxy). A probe cannot send a
bearer token or choose its Host header, so the route is outside both the token and the Host/Origin
checks; in exchange it tells only counts of downstreams by state, never their names, errors or tools.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import version

from starlette.requests import Request
from starlette.responses import JSONResponse

from toolwise.downstream.connection import Health

HEALTH_PATH = "/healthz"
_VERSION = version("toolwise")


def readiness(downstreams: Sequence[Health]) -> tuple[int, dict[str, object]]:
    """The HTTP status and the body `/healthz` answers for these downstreams' health."""
    states = Counter(h.state for h in downstreams)
    ready = states["ready"]
    if ready == 0:
        status, code = "unavailable", 503
    else:
        status, code = ("ok" if ready == len(downstreams) else "degraded"), 200
    counts = {state: states[state] for state in ("ready", "starting", "restarting", "failed", "stopped")}
    return code, {"status": status, "version": _VERSION, "downstreams": {"total": len(downstreams), **counts}}


def health_route(health: Callable[[], Sequence[Health]]) -> Callable[[Request], Awaitable[JSONResponse]]:
    """The `/healthz` handler over a catalogue's `health`."""

    async def healthz(request: Request) -> JSONResponse:
        code, body = readiness(health())
        return JSONResponse(body, status_code=code, headers={"Cache-Control": "no-store"})

    return healthz
