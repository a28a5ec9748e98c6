"""An HTTP downstream that refuses toolwise (401 or 403: a token missing or wrong) is said so in serve's log
and in its health, as doctor says it; the SDK's own error says only 'Server returned an error response'."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from toolwise.config import HttpServer, Settings
from toolwise.downstream.connection import Downstream


@pytest.fixture
def refusing() -> Iterator[str]:
    """The URL of an MCP endpoint that answers every request 401 (an API gateway wanting a token)."""

    class Refuses(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(401, "Unauthorized")
            self.send_header("WWW-Authenticate", "Bearer")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_DELETE = do_POST

        def log_message(self, *args: object) -> None:  # not on the test's stderr
            return

    server = HTTPServer(("127.0.0.1", 0), Refuses)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/mcp"
    finally:
        server.shutdown()
        thread.join()


async def test_an_http_downstream_answering_401_is_said_to_refuse_toolwise(refusing: str) -> None:
    spec = HttpServer.model_validate({"url": refusing})
    downstream = Downstream("api", spec, Settings(restart_backoff_s=30), on_tools=lambda: None)
    downstream.start()
    try:
        await downstream.wait_first_attempt()
    finally:
        await downstream.aclose()
    assert downstream.error is not None and downstream.error.startswith("answered 401 Unauthorized"), downstream.error
    assert "token" in downstream.error
