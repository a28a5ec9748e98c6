"""Large messages over HTTP, as large as over stdio: a result of an HTTP downstream reaches the client whole (the
SDK's HTTP client reads at most 1 MiB in one server-sent event unless told otherwise, and an answer over SSE, every
handshake-era answer and a 2026-07-28 one that streams, is one event: the toy server over real streamable HTTP,
uvicorn in this process, toolwise in-process), and `toolwise serve --http` takes a large argument."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.conftest import free_port, toolwise_http
from tests.e2e.test_http_downstream_restart import TimeOverHttp
from tests.server import toy_server
from tests.server.surface import text
from toolwise.config import AppConfig
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

LARGE = 3_000_000  # characters: a file read whole, a long log


@pytest.mark.parametrize("mode", ["legacy", "auto"])  # legacy: the downstream's handshake-era twin answers
async def test_a_result_of_megabytes_from_an_http_downstream_arrives_whole(tmp_path: Path, mode: str) -> None:
    port = free_port()
    downstream = TimeOverHttp(port, lambda: toy_server.build().streamable_http_app())
    config = AppConfig.model_validate(
        {
            "mcpServers": {"toy": {"type": "http", "url": f"http://127.0.0.1:{port}/mcp"}},
            "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"},
        }
    )
    await downstream.start()
    try:
        async with Toolwise(config) as app, Client(build_server(app), mode=mode) as client:
            large = await client.call_tool("toy__echo", {"text": "y" * LARGE})
            # before (legacy): "downstream server 'toy' closed the connection during the call; it is being restarted"
            assert not large.is_error, text(large)[:300]
            assert len(text(large)) == LARGE
            assert [(h.state, h.restarts) for h in app.catalogue.health()] == [("ready", 0)]  # never reconnected to
    finally:
        await downstream.stop()


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_argument_of_megabytes_reaches_the_downstream_over_http(write_config: Any, mode: str) -> None:
    """toolwise's own HTTP endpoint takes a request as large as its stdin takes a line: the SDK's default refused a
    body over 4 MiB with 413, which its client reads as 'Server returned an error response' (and toolwise logged
    only an access line)."""
    large = 6_000_000  # characters: above the SDK's 4 MiB
    async with toolwise_http(write_config({"toy": toy_server.spec()})) as url:
        transport = streamable_http_client(url, max_sse_event_size=None)  # this client reads the echo whole
        async with Client(transport, mode=mode) as client:
            echoed = await client.call_tool("toy__echo", {"text": "y" * large})
    assert not echoed.is_error, text(echoed)[:300]
    assert len(text(echoed)) == large
