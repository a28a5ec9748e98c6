"""What a downstream call can fail with, each named for whose fault it is: the caller's (refused here or
by the downstream), the tool's (a broken result) or the server's (down, dead, too slow, circuit open)."""

from __future__ import annotations

from mcp.shared.exceptions import MCPError


class DownstreamError(Exception):
    """A call could not be completed by the downstream server; the message says why and what next.
    `timed_out`: the downstream did not answer in time, which may be the caller's doing (its circuit
    counts it first: shields.py)."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class InvalidArgumentsError(DownstreamError):
    """The downstream answered invalid params (JSON-RPC -32602): the caller's fault, not the server's,
    so neither its circuit nor the tool's shield counts it."""


class RefusedCallerError(InvalidArgumentsError):
    """The downstream refused the caller itself (2026-07-28): a capability the caller did not declare,
    or a retry round's responses or state (e.g. a state that fails its integrity check). The caller
    gets the downstream's protocol error as it was given."""

    def __init__(self, message: str, refusal: MCPError) -> None:
        super().__init__(message)
        self.refusal = refusal


class InvalidResultError(DownstreamError):
    """The downstream answered, but with a result that breaks the tool's output schema (or the protocol's
    result shape): that call fails, and counts against the tool (its shield, learning); the server is up
    and answering, so its circuit does not count it and its other tools stay served."""


class CallCancelledError(Exception):
    """The client cancelled a proxied call (notifications/cancelled) or its connection closed before the
    downstream answered: recorded as a failed call of this type (`outcome_of`), never raised. Not a
    DownstreamError: the downstream did nothing wrong, so no circuit or shield counts it."""


class CircuitOpenError(DownstreamError):
    """The downstream failed repeatedly; calls fail fast until a probe after the cool-down succeeds."""
