"""`GET /healthz` on the HTTP transport: is this toolwise able to proxy, for a load balancer's or
Kubernetes' probe.

200 while at least one downstream is ready (`"status": "ok"` when all are and the store takes records,
`"degraded"` when some are not, toolwise serving the others, or when the store is failing or damaged:
calls are proxied but not recorded nor learned from), 503 when none is (or there are none to proxy).
A probe cannot send a bearer token or choose its Host header, so the route is outside both the token
and the Host/Origin checks; in exchange it tells only counts of downstreams by state and the store's
state in one word, never names, errors or tools.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse

from toolwise import __version__
from toolwise.downstream.connection import Health
from toolwise.feedback.records import WriterStats

HEALTH_PATH = "/healthz"
HEALTH_PATHS = (HEALTH_PATH, HEALTH_PATH + "/")  # a probe configured with the slash gets its answer, not 307/401


def readiness(downstreams: Sequence[Health], store: WriterStats) -> tuple[int, dict[str, object]]:
    """The HTTP status and the body `/healthz` answers for these downstreams' health and the store's."""
    states = Counter(h.state for h in downstreams)
    ready = states["ready"]
    kept = "failing" if store.failing is not None else "damaged" if store.damaged is not None else "ok"
    if ready == 0:
        status, code = "unavailable", 503
    else:
        status, code = ("ok" if ready == len(downstreams) and kept == "ok" else "degraded"), 200
    counts = {state: states[state] for state in ("ready", "starting", "restarting", "failed", "stopped")}
    downstream_counts = {"total": len(downstreams), **counts}
    return code, {"status": status, "version": __version__, "downstreams": downstream_counts, "store": kept}


def health_route(
    health: Callable[[], Sequence[Health]], store: Callable[[], WriterStats]
) -> Callable[[Request], Awaitable[JSONResponse]]:
    """The `/healthz` handler over a catalogue's `health` and the feedback store's `stats`."""

    async def healthz(request: Request) -> JSONResponse:
        code, body = readiness(health(), store())
        return JSONResponse(body, status_code=code, headers={"Cache-Control": "no-store"})

    return healthz
