"""OpenTelemetry across the proxy (the conventions for MCP): the caller's trace context in `_meta` is the
parent of toolwise's SERVER span, whose CLIENT span's context reaches the downstream in its `_meta`, so one
trace runs caller → toolwise → downstream; spans and duration histograms carry the conventions'
attributes and toolwise's own. In-process toolwise, a real downstream process (tests/server/meta_server.py),
both protocol eras; the SDK's in-memory exporter and metric reader."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from tests.server import meta_server
from tests.server.surface import as_meta, execution_of, held_elsewhere, running
from toolwise.config import AppConfig, ConfigError
from toolwise.downstream.tracing import Tracing
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server
from toolwise.server.tracing import from_environment

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
CALLER = {"traceparent": f"00-{TRACE}-{CALLER_SPAN}-01", "tracestate": "rojo=00f067aa0ba902b7", "baggage": "user=alice"}
ERAS = pytest.mark.parametrize("era", ["auto", "legacy"], ids=["2026-07-28", "handshake era"])


class Recorded:
    """What the in-memory exporter and reader hold."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.tracing = Tracing.of(provider, MeterProvider(metric_readers=[self.reader]))

    def span(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans.get_finished_spans() if s.name == name]
        assert len(found) == 1, [s.name for s in self.spans.get_finished_spans()]
        return found[0]

    def histogram(self, name: str) -> list[tuple[dict[str, Any], HistogramDataPoint]]:
        """The histogram's data points, each with its attributes."""
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            (dict(point.attributes or {}), point)
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == name
            for point in metric.data.data_points
            if isinstance(point, HistogramDataPoint)
        ]


@asynccontextmanager
async def traced(tmp_path: Path, era: str, tracing: Tracing | None) -> AsyncIterator[Client]:
    """In-process toolwise (traced with `tracing`) in front of the meta server as a process."""
    config = AppConfig.model_validate(
        {
            "mcpServers": {"probe": meta_server.spec()},
            "toolwise": {
                "database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}",
                "seed": 7,
                "snapshot_interval_s": 0,
                "sync_interval_s": 0,
            },
        }
    )
    async with Toolwise(config, tracing=tracing) as app, Client(build_server(app), mode=era) as client:
        yield client


def hex_span(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.span_id, "016x")


@ERAS
async def test_a_proxied_call_is_one_trace_from_the_caller_through_toolwise_to_the_downstream(
    tmp_path: Path, era: str
) -> None:
    recorded = Recorded()
    async with traced(tmp_path, era, recorded.tracing) as client:
        result = await client.call_tool("probe__meta", {}, meta=as_meta(CALLER))
        version = client.protocol_version
    heard: dict[str, Any] = dict(result.structured_content or {})
    server, downstream = recorded.span("tools/call probe__meta"), recorded.span("tools/call meta")

    assert server.kind is SpanKind.SERVER and server.parent is not None and server.context is not None
    assert format(server.parent.span_id, "016x") == CALLER_SPAN and server.parent.is_remote
    assert format(server.context.trace_id, "032x") == TRACE
    assert downstream.kind is SpanKind.CLIENT and downstream.parent is not None
    assert downstream.parent.span_id == server.context.span_id
    # The downstream heard toolwise's CLIENT span as its parent, in the caller's trace, with its state and baggage.
    assert heard["traceparent"] == f"00-{TRACE}-{hex_span(downstream)}-01"
    assert heard["tracestate"] == CALLER["tracestate"] and heard["baggage"] == CALLER["baggage"]

    assert server.attributes is not None and downstream.attributes is not None
    assert {k: server.attributes[k] for k in ("mcp.method.name", "gen_ai.tool.name", "mcp.protocol.version")} == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "probe__meta",
        "mcp.protocol.version": version,
    }
    assert server.attributes["gen_ai.operation.name"] == "execute_tool"
    assert server.attributes["network.transport"] == "pipe" and server.attributes["jsonrpc.request.id"]
    assert server.attributes["toolwise.execution_id"] == execution_of(result)
    assert server.attributes["toolwise.downstream"] == "probe"
    reward = server.attributes["toolwise.reward"]
    assert isinstance(reward, float) and 5 < reward <= 12  # a call that worked: +10, less its latency
    assert downstream.attributes["gen_ai.tool.name"] == "meta"
    assert downstream.attributes["network.transport"] == "pipe"  # the downstream's stdio
    assert downstream.attributes["mcp.protocol.version"] in {"2026-07-28", "2025-11-25"}
    assert "error.type" not in server.attributes and server.status.status_code is not StatusCode.ERROR

    for name in ("mcp.server.operation.duration", "mcp.client.operation.duration"):
        ((keys, point),) = [(k, p) for k, p in recorded.histogram(name) if k["mcp.method.name"] == "tools/call"]
        assert point.count == 1 and keys["gen_ai.tool.name"] in {"probe__meta", "meta"}
        assert point.explicit_bounds[0] == 0.01 and point.explicit_bounds[-1] == 300  # the conventions' buckets


async def test_a_tool_error_and_a_protocol_error_are_error_types_on_the_spans(tmp_path: Path) -> None:
    recorded = Recorded()
    async with traced(tmp_path, "auto", recorded.tracing) as client:
        result = await client.call_tool("probe__fail", {})
        with pytest.raises(MCPError):
            await client.call_tool("probe__nothing", {})
    assert result.is_error
    for name in ("tools/call probe__fail", "tools/call fail"):
        span = recorded.span(name)
        assert span.attributes is not None and span.attributes["error.type"] == "tool_error", name
        assert span.status.status_code is StatusCode.ERROR and span.status.description == "failed on purpose"
    failed_call = recorded.span("tools/call probe__fail").attributes
    assert failed_call is not None
    penalty = failed_call["toolwise.reward"]
    assert isinstance(penalty, float) and penalty < 0  # a failure: −5, less its latency
    unknown = recorded.span("tools/call probe__nothing")
    assert unknown.attributes is not None and unknown.attributes["error.type"] == "-32602"  # INVALID_PARAMS
    (failed,) = [keys for keys, _ in recorded.histogram("mcp.client.operation.duration") if "error.type" in keys]
    assert failed["error.type"] == "tool_error"


async def test_a_traced_call_does_not_wait_for_the_learning_threads_lock(tmp_path: Path) -> None:
    """The trace's reward reads the tool's mean latency without the learned state's lock: while the learning
    thread holds it for a run of calls, a proxied call is served, its span carrying the reward."""
    recorded = Recorded()
    async with running(tmp_path, tracing=recorded.tracing) as (app, client):
        await app.learning.until_loaded()
        assert not (await client.call_tool("toy__echo", {"text": "before"})).is_error
        await app.learning.drain()  # the tool has a mean latency: the reward reads it
        with held_elsewhere(app.learning.lock) as let_go:
            result = await client.call_tool("toy__echo", {"text": "while learning"})
            assert not let_go.is_set(), "the call waited for the learned state's lock"
    assert not result.is_error
    spans = [s for s in recorded.spans.get_finished_spans() if s.name == "tools/call toy__echo"]
    assert len(spans) == 2 and spans[1].attributes is not None
    reward = spans[1].attributes["toolwise.reward"]
    assert isinstance(reward, float) and 5 < reward <= 12  # a call that worked: +10, less its latency (+2 if fast)


async def test_a_call_that_follows_a_recommendation_carries_the_decision(tmp_path: Path) -> None:
    recorded = Recorded()
    async with traced(tmp_path, "legacy", recorded.tracing) as client:
        answer = await client.call_tool(
            "recommend_tool", {"query": "show the request meta", "candidates": ["probe__meta"], "top_k": 1}
        )
        decision = (answer.structured_content or {})["decision_id"]
        await client.call_tool("probe__meta", {})
    call = recorded.span("tools/call probe__meta")
    assert call.attributes is not None
    assert call.attributes["toolwise.decision_id"] == decision and call.attributes["toolwise.followed"] is True
    own = recorded.span("tools/call recommend_tool")
    assert own.parent is None and own.kind is SpanKind.SERVER  # no context from the caller: a trace of its own
    assert own.attributes is not None and own.attributes["toolwise.decision_id"] == decision


async def test_with_tracing_off_the_callers_trace_context_reaches_the_downstream_unchanged(tmp_path: Path) -> None:
    async with traced(tmp_path, "auto", None) as client:
        result = await client.call_tool("probe__meta", {}, meta=as_meta(CALLER))
    heard = dict(result.structured_content or {})
    assert {k: heard.get(k) for k in CALLER} == CALLER


def test_an_otlp_protocol_toolwise_cannot_set_up_is_refused_with_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ConfigError, match=r"http/protobuf only.*opentelemetry-instrument"):
        from_environment()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert from_environment() is None  # disabled: nothing is set up, nothing refused
