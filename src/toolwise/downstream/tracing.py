"""OpenTelemetry spans and duration histograms of MCP requests, in the conventions for MCP
(open-telemetry/semantic-conventions-genai, docs/gen-ai/mcp.md): one span per request, named
`{mcp.method.name} {target}`, its error as `error.type` (the JSON-RPC code, or `tool_error` for an
`isError` result), its trace context carried in `params._meta` (`traceparent`, `tracestate`, `baggage`).

Here: what both sides share, and the CLIENT span of a call toolwise makes of a downstream. The SDK's
client sends the request in a span of its own (`MCP send tools/call …`) within the current one and
injects that span's context into the request's `_meta` (replacing the caller's, forwarded whole), so
one trace runs client → toolwise → downstream. The SERVER side is server/tracing.py.

Tracing is on only with an SDK configured (`configured`; the `otel` extra installs one); otherwise no
`Tracing` exists and the request paths test one `None` and never reach this module's code.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS
from pydantic import ValidationError

try:
    from opentelemetry import metrics, trace
    from opentelemetry.context import Context
    from opentelemetry.trace import ProxyTracerProvider, SpanKind, StatusCode

    INSTALLED = True
except ImportError:  # the API comes with mcp; should it not, tracing stays off
    INSTALLED = False

if TYPE_CHECKING:
    from mcp import Client
    from opentelemetry.metrics import Histogram, MeterProvider
    from opentelemetry.trace import Span, Tracer, TracerProvider

# The buckets the conventions advise for the operation-duration histograms (seconds).
DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
TOOL_ERROR = "tool_error"  # error.type of a CallToolResult with isError
# The attributes a duration histogram keeps (low cardinality: no session or request ids).
_METRIC_KEYS = (
    "mcp.method.name",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "gen_ai.operation.name",
    "mcp.protocol.version",
    "network.transport",
    "error.type",
)

R = TypeVar("R")


@dataclass
class Operation:
    """One MCP request in flight under its span."""

    span: Span
    attributes: dict[str, Any]
    error: str | None = field(default=None, init=False)

    def answered(self, result: R) -> R:
        """The request's answer: a tool result with isError (a model, or its wire form from a middleware's
        `call_next`) marks the span failed (`tool_error`)."""
        text: Any
        if isinstance(result, types.CallToolResult) and result.is_error:
            text = next((b.text for b in result.content if isinstance(b, types.TextContent)), TOOL_ERROR)
        elif isinstance(result, Mapping) and result.get("isError") is True:
            text = next((b.get("text") for b in result.get("content") or [] if isinstance(b, Mapping)), None)
        else:
            return result
        self.error = TOOL_ERROR
        self.span.set_status(StatusCode.ERROR, str(text or TOOL_ERROR)[:200])
        return result

    def failed(self, exc: BaseException) -> None:
        """No answer: a JSON-RPC error is its code (as the conventions ask), anything else its class."""
        if isinstance(exc, MCPError):
            self.error = str(exc.code)
            self.span.set_attribute("rpc.response.status_code", self.error)
            self.span.set_status(StatusCode.ERROR, exc.error.message)
        elif isinstance(exc, ValidationError):  # answered as invalid params; its message carries the input
            self.error = str(INVALID_PARAMS)
            self.span.set_attribute("rpc.response.status_code", self.error)
            self.span.set_status(StatusCode.ERROR, "Invalid request parameters")
        else:
            self.error = type(exc).__qualname__
            self.span.set_status(StatusCode.ERROR, str(exc)[:200])


@dataclass
class Tracing:
    """Where toolwise's spans and the two duration histograms go (the global providers unless given)."""

    tracer: Tracer
    server_duration: Histogram
    client_duration: Histogram

    @classmethod
    def of(cls, tracer_provider: TracerProvider | None = None, meter_provider: MeterProvider | None = None) -> Tracing:
        meter = metrics.get_meter("toolwise", meter_provider=meter_provider)
        return cls(
            trace.get_tracer("toolwise", tracer_provider=tracer_provider),
            meter.create_histogram(
                "mcp.server.operation.duration",
                unit="s",
                description="MCP requests toolwise served, from request to answer.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            meter.create_histogram(
                "mcp.client.operation.duration",
                unit="s",
                description="MCP requests toolwise made of its downstreams, from sending to the answer.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
        )

    @contextlib.contextmanager
    def operation(
        self, kind: SpanKind, attributes: dict[str, Any], parent: Context | None = None
    ) -> Iterator[Operation]:
        """A span named by the conventions around one request (current while it runs), and its duration."""
        method = attributes["mcp.method.name"]
        target = attributes.get("gen_ai.tool.name") or attributes.get("gen_ai.prompt.name")
        name = f"{method} {target}" if target else method
        histogram = self.server_duration if kind is SpanKind.SERVER else self.client_duration
        start = time.perf_counter()
        with self.tracer.start_as_current_span(
            name, context=parent, kind=kind, attributes=attributes, set_status_on_exception=False
        ) as span:
            operation = Operation(span, attributes)
            try:
                yield operation
            except BaseException as exc:
                operation.failed(exc)
                raise
            finally:
                if operation.error is not None:
                    span.set_attribute("error.type", operation.error)
                    attributes["error.type"] = operation.error
                kept = {key: attributes[key] for key in _METRIC_KEYS if key in attributes}
                histogram.record(time.perf_counter() - start, kept)

    @contextlib.contextmanager
    def client_call(self, tool: str, downstream: str, client: Client, transport: str) -> Iterator[Operation]:
        """The CLIENT span of one tools/call toolwise makes of `downstream` (current while it runs: the
        request's `_meta` carries its context)."""
        attributes: dict[str, Any] = {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": tool,
            "gen_ai.operation.name": "execute_tool",
            "mcp.protocol.version": client.protocol_version,
            "network.transport": transport,
            "toolwise.downstream": downstream,
        }
        with self.operation(SpanKind.CLIENT, attributes) as operation:
            yield operation


def configured() -> Tracing | None:
    """The tracing of the globally configured SDK (server/tracing.py `from_environment`, or
    `opentelemetry-instrument`); None when the extra is missing or no SDK is configured: tracing is off."""
    if not INSTALLED or isinstance(trace.get_tracer_provider(), ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return Tracing.of()
