"""A stdio downstream's stderr as toolwise relays it: each line named for the server, its secrets masked, and the
pipe always drained (a process whose stderr nobody reads stops once the pipe is full)."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import time

import pytest

from toolwise.downstream.stderr import StderrRelay, given_secrets


class Slow(io.StringIO):
    def write(self, text: str) -> int:
        time.sleep(0.0002)
        return super().write(text)


def run(relay: StderrRelay, code: str) -> int:
    process = subprocess.run([sys.executable, "-c", code], stderr=relay.errlog, timeout=60, check=False)
    relay.close()
    relay.join(10)
    return process.returncode


def test_each_line_is_named_for_its_server_with_the_keys_it_was_given_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    env = {"WEATHER_API_KEY": "k3y-" + "x" * 16, "REGION": "eu-west-1", "LOG_LEVEL": "debug"}
    relay = StderrRelay("weather", given_secrets(env))
    assert (
        run(relay, "import sys; print('key k3y-' + 'x' * 16 + ' region eu-west-1', file=sys.stderr); print('ok')") == 0
    )
    assert out.getvalue() == "[weather] key *** region eu-west-1\n"


def test_a_closed_stderr_does_not_stop_the_downstream_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = io.StringIO()
    closed.close()  # writes raise ValueError, as toolwise's stderr does once the client closed it
    monkeypatch.setattr(sys, "stderr", closed)
    relay = StderrRelay("chatty")
    lines = 20_000  # about 2 MB: many times a pipe's buffer
    assert run(relay, f"import sys\nfor i in range({lines}): print('x' * 100, file=sys.stderr)") == 0
    assert relay.unwritten == lines


def test_a_line_that_never_ends_is_relayed_in_pieces_not_held_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    relay = StderrRelay("progress")
    assert run(relay, "import sys; sys.stderr.write('#' * 200_000)") == 0  # no newline: a progress bar's \r
    pieces = out.getvalue().splitlines()
    assert len(pieces) == 4 and all(p.startswith("[progress] #") for p in pieces)
    assert sum(len(p) - len("[progress] ") for p in pieces) == 200_000


def test_the_secrets_given_are_the_values_of_secret_names_in_env_and_args_not_the_flags_after_a_switch() -> None:
    env = {"WEATHER_API_KEY": "k3y-" + "x" * 16, "REGION": "eu-west-1"}
    args = ["--no-auth", "--port", "8080", "--api-key", "a" * 20, "--token=" + "t" * 20, "--verbose"]
    assert given_secrets(env, args) == ["k3y-" + "x" * 16, "a" * 20, "t" * 20]


async def test_a_closed_relay_has_relayed_every_line_the_process_wrote(monkeypatch: pytest.MonkeyPatch) -> None:
    """The connection's end waits for the relay: lines still in the pipe when the process exits were relayed
    after the connection was gone, or lost when toolwise exited (its relay thread is a daemon)."""
    out = Slow()  # a log slower than the process writes: lines are still in the pipe when it exits
    monkeypatch.setattr(sys, "stderr", out)
    relay = StderrRelay("last-words")
    code = "import sys\nfor i in range(3000): print(f'line {i} ' + 'x' * 100, file=sys.stderr)"
    command = [sys.executable, "-c", code]
    process = await asyncio.to_thread(subprocess.run, command, stderr=relay.errlog, timeout=60, check=False)
    await relay.aclose()
    assert process.returncode == 0
    assert out.getvalue().count("\n") == 3000 and out.getvalue().endswith("[last-words] line 2999 " + "x" * 100 + "\n")
