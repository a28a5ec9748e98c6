"""The README's tracing set-up, end to end: `toolwise serve` (stdio, HTTP) with OTEL_EXPORTER_OTLP_ENDPOINT
exports, over OTLP/HTTP, one trace per proxied call from the caller's `_meta` through toolwise to a real
downstream process, in both protocol eras; here to a stand-in collector that keeps what it is sent."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from tests.e2e.conftest import BIN, toolwise_http
from tests.server import meta_server

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class Collector:
    """A stand-in OTLP/HTTP collector: the spans and metric names it was sent."""

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.metrics: set[str] = set()
        self.services: set[str] = set()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.path == "/v1/traces":
                    request = ExportTraceServiceRequest.FromString(body)
                    for resource in request.resource_spans:
                        collector.services |= {
                            a.value.string_value for a in resource.resource.attributes if a.key == "service.name"
                        }
                        collector.spans += [span for scope in resource.scope_spans for span in scope.spans]
                    answer = ExportTraceServiceResponse().SerializeToString()
                else:
                    metrics = ExportMetricsServiceRequest.FromString(body)
                    collector.metrics |= {
                        m.name for r in metrics.resource_metrics for s in r.scope_metrics for m in s.metrics
                    }
                    answer = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                return None  # quiet

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def named(self, name: str) -> list[Span]:
        return [s for s in self.spans if s.name == name]

    async def wait_for(self, name: str, count: int) -> list[Span]:
        for _ in range(300):
            if len(self.named(name)) >= count:
                return self.named(name)
            await asyncio.sleep(0.05)
        raise AssertionError(f"{count} spans {name!r} never arrived: {[s.name for s in self.spans]}")


@pytest.fixture
def collector(monkeypatch: pytest.MonkeyPatch) -> Iterator[Collector]:
    """A collector, and the three lines of the README that point toolwise at it (plus short export delays)."""
    collector = Collector()
    thread = threading.Thread(target=collector.server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "toolwise-e2e")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "200")
    try:
        yield collector
    finally:
        collector.server.shutdown()
        thread.join()


def caller_meta() -> Any:
    return {"traceparent": f"00-{TRACE}-{CALLER_SPAN}-01"}


def attributes(span: Span) -> dict[str, Any]:
    return {a.key: a.value.string_value or a.value.bool_value or a.value.int_value for a in span.attributes}


def assert_one_trace(collector: Collector, heard: dict[str, Any], transport: str) -> tuple[Span, Span]:
    """The newest call's SERVER span is the caller's child, its CLIENT span the SERVER's, and the
    downstream heard, as its parent, the span the SDK's client sends the request in (within the CLIENT
    span: `MCP send tools/call meta`); returns both."""
    server, client = collector.named("tools/call probe__meta")[-1], collector.named("tools/call meta")[-1]
    assert server.kind == Span.SPAN_KIND_SERVER and client.kind == Span.SPAN_KIND_CLIENT
    assert server.trace_id.hex() == client.trace_id.hex() == TRACE
    assert server.parent_span_id.hex() == CALLER_SPAN and client.parent_span_id == server.span_id
    _, trace, parent, _ = heard["traceparent"].split("-")
    (sent,) = [s for s in collector.spans if s.span_id.hex() == parent]
    assert trace == TRACE and sent.name == "MCP send tools/call meta" and sent.parent_span_id == client.span_id
    assert attributes(server)["network.transport"] == transport and attributes(client)["network.transport"] == "pipe"
    assert attributes(server)["toolwise.execution_id"]
    return server, client


@pytest.mark.parametrize("era", ["auto", "legacy"], ids=["2026-07-28", "handshake era"])
async def test_stdio_serve_exports_one_trace_per_proxied_call(
    collector: Collector, write_config: Callable[..., Path], era: str
) -> None:
    config = write_config({"probe": meta_server.spec()})
    params = StdioServerParameters(
        command=str(BIN / "toolwise"),
        args=["serve", "--config", str(config), "--log-level", "warning"],
        env=dict(os.environ),
    )
    async with Client(params, mode=era, read_timeout_seconds=60) as client:
        result = await client.call_tool("probe__meta", {}, meta=caller_meta())
        version = client.protocol_version
    await collector.wait_for("tools/call meta", 1)
    server, _ = assert_one_trace(collector, dict(result.structured_content or {}), "pipe")
    assert attributes(server)["mcp.protocol.version"] == version
    assert len(collector.named("tools/call probe__meta")) == 1  # toolwise's SERVER span, in place of the SDK's
    assert collector.services == {"toolwise-e2e"}
    for _ in range(100):  # the last export comes as the process exits
        if {"mcp.server.operation.duration", "mcp.client.operation.duration"} <= collector.metrics:
            break
        await asyncio.sleep(0.05)
    assert {"mcp.server.operation.duration", "mcp.client.operation.duration"} <= collector.metrics


async def test_http_serve_exports_one_trace_per_proxied_call_in_both_eras(
    collector: Collector, write_config: Callable[..., Path]
) -> None:
    async with toolwise_http(write_config({"probe": meta_server.spec()})) as url:
        for count, era in enumerate(("auto", "legacy"), 1):
            async with Client(url, mode=era) as client:
                result = await client.call_tool("probe__meta", {}, meta=caller_meta())
            await collector.wait_for("tools/call meta", count)
            server, _ = assert_one_trace(collector, dict(result.structured_content or {}), "tcp")
            if era == "legacy":  # a handshake-era HTTP client has a session (Mcp-Session-Id)
                assert attributes(server)["mcp.session.id"]
