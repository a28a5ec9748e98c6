"""`GET /healthz` of a real `toolwise serve --http`: a probe without the bearer token (and with a Host
the token-guarded routes refuse) learns whether toolwise can proxy, and nothing more."""

from __future__ import annotations

import asyncio
import json
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import time_server
from tests.e2e.test_http_access import TOKEN, serving

BROKEN = {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}  # exits before its handshake


def probe(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_healthz_answers_without_the_token_with_counts_only(write_config: Callable[..., Path]) -> None:
    config = write_config({"time": time_server(), "broken": BROKEN}, restart_backoff_s=30)
    with serving(config, "127.0.0.1", TOOLWISE_HTTP_TOKEN=TOKEN) as base:
        status, body = await asyncio.to_thread(probe, base + "/healthz", {"Host": "10.1.2.3:8080"})
        assert status == 200, body
        assert body["status"] == "degraded" and body["downstreams"]["total"] == 2
        assert body["downstreams"]["ready"] == 1 and "broken" not in json.dumps(body)  # no names
        assert (await asyncio.to_thread(probe_status, base + "/metrics")) == 401  # the rest keeps its lock
        slashed = await asyncio.to_thread(probe, base + "/healthz/")  # as a probe's config may well write it
        assert slashed[0] == 200 and slashed[1]["downstreams"] == body["downstreams"], slashed


async def test_healthz_is_503_when_no_downstream_can_serve(write_config: Callable[..., Path]) -> None:
    with serving(write_config({"broken": BROKEN}, restart_backoff_s=30), "127.0.0.1") as base:
        status, body = await asyncio.to_thread(probe, base + "/healthz")
    assert status == 503 and body["status"] == "unavailable" and body["downstreams"]["ready"] == 0


def probe_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
