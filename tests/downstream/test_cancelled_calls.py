"""A cancelled call is the client's choice, not the downstream failing: it never counts against the
downstream's circuit, and a cancelled probe lets the next call probe."""

from __future__ import annotations

import asyncio
import time

import pytest

from toolwise.config import StdioServer
from toolwise.downstream.errors import CircuitOpenError
from toolwise.downstream.forwarding import forward
from toolwise.downstream.shields import Circuit, CircuitState
from toolwise.downstream.tracing import Tracing


class Hanging:
    """A downstream whose calls never answer (until cancelled); `entered` counts the calls let through."""

    def __init__(self) -> None:
        self.name = "slow"
        self.spec = StdioServer.model_validate({"command": "slow"})
        self.circuit = Circuit(threshold=1, cooldown_s=30)
        self.tracing: Tracing | None = None
        self.entered = 0

    async def ready_session(self, deadline: float, tool: str, rounds: object) -> object:
        self.entered += 1
        await asyncio.Event().wait()
        raise AssertionError("never answers")

    def broke(self, client: object) -> None:
        raise AssertionError("the connection never breaks here")


def state(circuit: Circuit) -> CircuitState:
    return circuit.state


async def started(downstream: Hanging, caller: str) -> asyncio.Task[object]:
    """A call of `caller` in flight (let through the circuit and waiting on the downstream)."""
    entered = downstream.entered
    task: asyncio.Task[object] = asyncio.create_task(forward(downstream, "t", None, 60.0, caller=caller))  # type: ignore[arg-type]
    while downstream.entered == entered and not task.done():
        await asyncio.sleep(0)
    assert not task.done(), "the call was not let through"
    return task


async def cancelled(task: asyncio.Task[object]) -> None:
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_call_is_no_failure_and_a_cancelled_probe_lets_the_next_call_probe() -> None:
    downstream = Hanging()
    circuit = downstream.circuit
    earlier = await started(downstream, "a")  # let through while the circuit was closed
    circuit.failed(time.monotonic() - 60, "b")  # another call failed: open, its cool-down over
    probe = await started(downstream, "b")
    assert state(circuit) == "half-open"
    await cancelled(earlier)  # not the probe: the client gave up, the downstream did not fail
    assert state(circuit) == "half-open" and circuit.failures == 1
    with pytest.raises(CircuitOpenError):
        await forward(downstream, "t", None, 60.0, caller="c")  # type: ignore[arg-type]
    await cancelled(probe)
    assert circuit.failures == 1, "a cancelled probe counted as a failure"
    await cancelled(await started(downstream, "c"))  # the next call probes
    assert state(circuit) == "half-open" and circuit.failures == 1


async def test_a_call_its_own_circuit_refuses_leaves_the_downstreams_probe_to_the_next_call() -> None:
    """A client whose own circuit (its timeouts) waits on its probe, calling when the downstream's circuit
    is half-open, is refused by its own: it took no probe of the downstream's, so another client's call
    probes it, even once that client's probe is cancelled (nothing else would ever end the wait)."""
    downstream = Hanging()
    circuit = downstream.circuit
    now = time.monotonic()
    circuit.failed(now - 100, "a", timed_out=True)  # a's own circuit opens (its cool-down over); the downstream's not
    own_probe = await started(downstream, "a")  # a's probe, let through while the downstream's circuit was closed
    circuit.failed(now - 60, "b")  # the downstream fails for everyone: open, its cool-down over
    with pytest.raises(CircuitOpenError, match="this client's calls to 'slow' timed out 1 times"):
        await forward(downstream, "t", None, 60.0, caller="a")  # type: ignore[arg-type]  # its own probe is in flight
    await cancelled(own_probe)  # the client gives up on it
    await cancelled(await started(downstream, "c"))  # another client probes the downstream
    assert state(circuit) == "half-open"
