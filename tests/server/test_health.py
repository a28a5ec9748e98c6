"""`/healthz`'s answer (server/health.py) for downstreams' and the store's states: a probe is told the
truth, in counts and words that name nothing."""

from __future__ import annotations

import json

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.testclient import TestClient

from toolwise.downstream.connection import Health
from toolwise.feedback.records import WriterStats
from toolwise.server.health import HEALTH_PATH, health_route

READY = [Health("time", "ready", 2, 0, None)]


def healthz(store: WriterStats) -> tuple[int, dict[str, object]]:
    app = Starlette(routes=[Route(HEALTH_PATH, health_route(lambda: READY, lambda: store), methods=["GET"])])
    response = TestClient(app).get(HEALTH_PATH)
    return response.status_code, response.json()


def test_healthz_is_degraded_not_ok_while_the_store_refuses_records() -> None:
    """Every downstream ready but the database failing (a full disk, a lock, Postgres down): toolwise
    proxies, so 200, but nothing is recorded nor learned, so not `ok`; why is not told (no error text)."""
    fine = WriterStats(enqueued=0, committed=0, queue_depth=0, batches=0, failed_batches=0, dead_lettered=0)
    assert healthz(fine) == (200, {**healthz(fine)[1], "status": "ok", "store": "ok"})
    failing = WriterStats(
        enqueued=9, committed=0, queue_depth=9, batches=3, failed_batches=3, dead_lettered=0,
        failing="database or disk is full: /home/me/.local/share/toolwise/toolwise.db",
    )  # fmt: skip
    code, body = healthz(failing)
    assert code == 200 and body["status"] == "degraded" and body["store"] == "failing"
    assert "disk" not in json.dumps(body) and "toolwise.db" not in json.dumps(body)
