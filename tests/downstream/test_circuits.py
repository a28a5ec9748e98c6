"""A downstream's circuit breaker: what opens it for every client, and what only for the client whose
calls timed out (a timeout may be the caller's doing)."""

from __future__ import annotations

from toolwise.downstream.shields import Circuit, CircuitState


def state(circuit: Circuit) -> CircuitState:
    """Read afresh after each step (an assertion on the attribute would narrow its type for the rest)."""
    return circuit.state


def test_one_clients_timeouts_open_its_own_circuit_not_the_downstreams() -> None:
    circuit = Circuit(threshold=5, cooldown_s=30)
    for i in range(5):
        assert circuit.admit(float(i), "a") is None
        circuit.failed(float(i), "a", timed_out=True)
    assert circuit.state == "closed" and circuit.admit(5.0, "b") is None  # other clients' calls go through
    assert circuit.admit(5.0, "a") == 29.0 and circuit.timeouts_of("a") == 5  # its own fail fast
    assert circuit.admit(34.0, "a") is None  # its probe, after the cool-down
    circuit.succeeded("a")
    assert circuit.timeouts_of("a") is None and circuit.admit(35.0, "a") is None


def test_timeouts_of_several_clients_open_the_downstreams_circuit_for_all() -> None:
    circuit = Circuit(threshold=5, cooldown_s=30)
    for i, caller in enumerate("ababa"):
        circuit.failed(float(i), caller, timed_out=True)
    assert circuit.state == "open" and circuit.admit(5.0, "c") == 29.0


def test_a_failure_that_is_not_a_timeout_is_everyones() -> None:
    circuit = Circuit(threshold=5, cooldown_s=30)
    circuit.failed(0.0, "a")  # the downstream died or refused the connection
    for i in range(1, 5):
        circuit.failed(float(i), "a", timed_out=True)
    assert circuit.state == "open" and circuit.admit(5.0, "b") is not None


def test_a_server_with_one_client_opens_on_its_timeouts_as_before() -> None:
    circuit = Circuit(threshold=5, cooldown_s=30)
    for i in range(5):
        circuit.failed(float(i), None, timed_out=True)  # a stdio server's one client
    assert circuit.state == "open" and circuit.admit(5.0) == 29.0


def test_a_success_ends_the_run_of_failures_and_a_cancelled_probe_lets_the_next_call_probe() -> None:
    circuit = Circuit(threshold=2, cooldown_s=30)
    circuit.failed(0.0, "a", timed_out=True)
    circuit.succeeded("b")
    circuit.failed(1.0, "b", timed_out=True)
    assert state(circuit) == "closed"  # one timeout each, with a success between: no run of two
    circuit.failed(2.0, "a", timed_out=True)
    assert state(circuit) == "open"  # a run of two, by two clients
    assert circuit.admit(32.0, "a") is None and state(circuit) == "half-open"
    probes = circuit.probes("a")
    assert circuit.admit(32.1, "b") is not None  # the others wait for the probe's verdict
    Circuit.abandoned(probes)
    assert state(circuit) == "half-open" and circuit.failures == 2  # no verdict, no failure
    assert circuit.admit(32.5, "b") is None  # the next call probes
