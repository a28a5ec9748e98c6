"""The SERVER side of toolwise's OpenTelemetry traces (the conventions for MCP; shared parts and the
CLIENT side: downstream/tracing.py): a span for every message toolwise serves, whose parent is the
context the caller put in `params._meta`, with toolwise's own attributes (execution, decision, whether
the call followed the recommendation) beside the conventional ones. It takes the place of the SDK's
`OpenTelemetryMiddleware` (whose span lacks the transport, the session and toolwise's attributes, and
which records no duration); with tracing off neither runs.

Configured by the standard OTEL_* variables (`from_environment`): a process started under
`opentelemetry-instrument` keeps the SDK it set up; otherwise, with OTEL_EXPORTER_OTLP_ENDPOINT (or
OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) set, toolwise sets up the SDK with OTLP exporters itself. Off
otherwise: the server runs no middleware, nothing on a request's path calls into OpenTelemetry.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from mcp.server import ServerRequestContext
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware

from toolwise.config import ConfigError
from toolwise.downstream.callers import connection_of, wire_meta
from toolwise.downstream.tracing import INSTALLED, Tracing, configured
from toolwise.feedback.records import Execution

if INSTALLED:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import SpanKind

log = logging.getLogger(__name__)

_RESOURCE_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe"})


class TracingMiddleware:
    """A SERVER span around every message toolwise serves (the SDK's middleware seam), with the
    transport, the session and toolwise's attributes the SDK's own span lacks, and its duration."""

    def __init__(self, tracing: Tracing) -> None:
        self.tracing = tracing

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        parent = propagate.extract(wire_meta(ctx) or {})
        with self.tracing.operation(SpanKind.SERVER, _attributes(ctx), parent) as operation:
            return operation.answered(await call_next(ctx))


def middleware(tracing: Tracing | None) -> list[ServerMiddleware[Any]]:
    """The middleware toolwise's server runs: ours when tracing is on, in place of the SDK's span (one
    SERVER span a request); none when it is off, so a request never calls into OpenTelemetry."""
    return [] if tracing is None else [TracingMiddleware(tracing)]


def _attributes(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The conventions' attributes of a message served (`ctx.params`: raw, not validated yet;
    `ctx.request`: the HTTP request, on HTTP)."""
    method, params = ctx.method, ctx.params or {}
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "mcp.protocol.version": ctx.protocol_version,
        "network.transport": "tcp" if ctx.request is not None else "pipe",
    }
    name = params.get("name")
    if method == "tools/call" and isinstance(name, str):
        attributes["gen_ai.tool.name"] = name
        attributes["gen_ai.operation.name"] = "execute_tool"
    elif method == "prompts/get" and isinstance(name, str):
        attributes["gen_ai.prompt.name"] = name
    elif method in _RESOURCE_METHODS and isinstance(params.get("uri"), str):
        attributes["mcp.resource.uri"] = params["uri"]
    if ctx.request_id is not None:
        attributes["jsonrpc.request.id"] = str(ctx.request_id)
    session_id = connection_of(ctx).session_id  # the Mcp-Session-Id of a handshake-era HTTP client
    if session_id:
        attributes["mcp.session.id"] = session_id
    return attributes


def noted(execution: Execution | None, reward: float | None = None) -> None:
    """A proxied call was noted: its execution, the decision it follows and the reward it will be
    learned with (learning happens after the answer) on the request's span."""
    if execution is None:  # not in its session's window: cannot be, it was noted just now
        return
    span = trace.get_current_span()
    span.set_attribute("toolwise.execution_id", execution.id)
    span.set_attribute("toolwise.downstream", execution.server)
    if execution.decision_id is not None:
        span.set_attribute("toolwise.decision_id", execution.decision_id)
        span.set_attribute("toolwise.followed", execution.propensity is not None)  # set only for the chosen tool
    if execution.explored is not None:
        span.set_attribute("toolwise.explored", execution.explored)
    if reward is not None:
        span.set_attribute("toolwise.reward", reward)


def recommended(decision_id: str) -> None:
    """One of our tools answered with a decision (recommend_tool, search_tools): its id on the request's
    span, as on the spans of the calls that follow it."""
    trace.get_current_span().set_attribute("toolwise.decision_id", decision_id)


# Where the extra comes from: toolwise's checkout, into toolwise's own environment (a registry's `toolwise`
# is not this one, and the shell's pip installs elsewhere).
OTEL_EXTRA = (
    "install toolwise again from its checkout with the otel extra: `pipx install --force '.[otel]'`, "
    "`uv tool install --force '.[otel]'` or `pip install -e '.[otel]'` in its .venv"
)


def from_environment() -> Tracing | None:
    """Tracing as the OTEL_* variables configure it; None (off) without the `otel` extra, with
    OTEL_SDK_DISABLED=true, or with neither an SDK set up already nor an OTLP endpoint named."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if not INSTALLED:
        if endpoint:
            log.warning("%s is set but OpenTelemetry is not installed beside toolwise: %s", endpoint, OTEL_EXTRA)
        return None
    if configured() is None and endpoint:
        _set_up_otlp()
    return configured()


def _set_up_otlp() -> None:
    """The SDK with OTLP exporters of traces and metrics; the exporters read the other OTEL_EXPORTER_OTLP_*
    variables themselves (headers, protocol-specific endpoints), the resource OTEL_SERVICE_NAME and
    OTEL_RESOURCE_ATTRIBUTES. The SDK flushes what is left when the process exits."""
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    if protocol != "http/protobuf":
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: toolwise sets up OTLP over http/protobuf only (port 4318); "
            "for another protocol start it under opentelemetry-instrument, which sets the SDK up as configured"
        )
    try:
        from opentelemetry import metrics
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise ConfigError(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but the OpenTelemetry SDK or its OTLP exporter is not installed "
            f"({exc}): {OTEL_EXTRA}"
        ) from exc
    resource = Resource.create({"service.name": "toolwise"}).merge(OTELResourceDetector().detect())
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(
        MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(OTLPMetricExporter())])
    )
    log.info("tracing to the OTLP collector at %s", os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
