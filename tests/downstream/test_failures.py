"""Downstream failures in words a person can act on, and junk output summed up, not logged per line."""

from __future__ import annotations

import asyncio
import logging
import sys

import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import CONNECTION_CLOSED

from toolwise.downstream.failures import JunkReport, describe, exited


def test_exit_statuses_and_wrapped_errors_are_said_plainly() -> None:
    assert exited(3) == "command exited with status 3"
    assert exited(-9) == "command was killed by SIGKILL"
    try:
        try:
            raise ConnectionRefusedError(111, "Connect call failed")
        except OSError as exc:
            raise ExceptionGroup(
                "unhandled errors in a TaskGroup", [RuntimeError("All connection attempts failed")]
            ) from exc
    except ExceptionGroup as group:
        assert describe(group, starting=True, start_timeout_s=30, exit_status=None) == "connection refused"
    closed = ExceptionGroup("unhandled errors in a TaskGroup", [MCPError(CONNECTION_CLOSED, "Connection closed")])
    assert describe(closed, starting=True, start_timeout_s=30, exit_status=2) == "command exited with status 2"
    assert (
        describe(closed, starting=True, start_timeout_s=30, exit_status=None) == "closed the connection while starting"
    )
    assert describe(TimeoutError(), starting=True, start_timeout_s=7.5, exit_status=-15) == (
        "no answer to initialize within 7.5s (start_timeout_s)"
    )


async def test_junk_lines_are_logged_once_then_summed_up(caplog: pytest.LogCaptureFixture) -> None:
    report = JunkReport("noisy", every_s=0.05)
    with caplog.at_level(logging.WARNING, logger="toolwise.downstream.failures"):
        for i in range(500):
            report.add(ValueError(f"line {i}"))
        await asyncio.sleep(0.1)
        report.add(ValueError("late"))
        report.close()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3 and report.total == 501
    assert "line 0" in messages[0]
    assert "499 more lines" in messages[1] and "500 in all" in messages[1]
    assert "1 more lines" in messages[2] and "late" in messages[2]


def test_a_command_line_written_as_the_command_is_said_so_without_its_arguments() -> None:
    """ "command": "npx -y @scope/server --api-key KEY", a README's one-liner pasted whole: serve's log (which the
    client keeps) named the whole line as the command not found, a secret argument with it."""
    line = f"{sys.executable} -m mcp_server_time --api-key {'plain' + 'K' * 20}"
    missing = FileNotFoundError(2, "No such file or directory", line)
    assert describe(missing, starting=True, start_timeout_s=30, exit_status=None) == (
        f'command not found: {sys.executable!r} is written with its arguments in "command" (they go in "args")'
    )
