"""A stdio downstream's stderr, relayed into toolwise's own a line at a time: named for its server (several
write to the one log a client keeps, Claude Desktop's mcp-server-toolwise.log) and with its secrets masked as
toolwise's own lines are: the secret shapes, and the values of the server's `env` and `args` whose names say
they are secrets (a server that logs the key it was given, in a shape no pattern knows).

The reads block, so they run on a thread of their own, never on the event loop; the thread always drains the
pipe (a downstream whose stderr fills a pipe nobody reads stops mid-write), and ends at the pipe's end."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import BinaryIO, TextIO

from toolwise.config import SHORTEST_HIDDEN
from toolwise.feedback.arguments import REDACTED, after_secret_flag, joined_secret, masked_text, names_secret

LINE_BYTES = 65536


def given_secrets(env: Mapping[str, str] | None, args: Sequence[str] = ()) -> list[str]:
    """The values of a server's `env` whose names say they are secrets (`GITHUB_TOKEN`, `WEATHER_API_KEY`), and
    of its `args` given after a flag whose name says so (`--api-key KEY`, `--token=KEY`)."""
    given = [value for name, value in (env or {}).items() if names_secret(name)]
    for i, arg in enumerate(args):
        if joined := joined_secret(arg):
            given.append(joined[1])
        elif after_secret_flag(args, i) and not arg.startswith("-"):  # `--no-auth --port`: a switch, no value
            given.append(arg)
    return [value for value in given if len(value) >= SHORTEST_HIDDEN]


class StderrRelay:
    """The pipe a stdio downstream writes its stderr to (`errlog`, handed to the process) and the thread that
    relays each line to toolwise's stderr as `[name] line`. The thread ends when every holder of the write end
    has closed it: the process (and any child of its that inherited it) and toolwise (`close`)."""

    def __init__(self, name: str, secrets: Iterable[str] = ()) -> None:
        read, write = os.pipe()  # neither end inherited by other processes toolwise starts (PEP 446)
        self.name = name
        self.secrets = sorted(set(secrets), key=len, reverse=True)  # longest first: one may hold another
        self.unwritten = 0  # lines toolwise's own stderr refused (closed): drained, so the downstream goes on
        self.errlog: TextIO = os.fdopen(write, "w", encoding="utf-8")
        pipe = os.fdopen(read, "rb")
        self._thread = threading.Thread(target=self._relay, args=(pipe,), name=f"stderr of {name}", daemon=True)
        self._thread.start()

    def mask(self, line: str) -> str:
        """`line` with the server's secrets and every secret-shaped part masked."""
        for secret in self.secrets:
            line = line.replace(secret, REDACTED)
        return masked_text(line)

    def close(self) -> None:
        """toolwise's copy of the write end closed (the process has its own): once the process is gone, the
        relay reads the pipe's end."""
        self.errlog.close()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    async def aclose(self, timeout_s: float = 1.0) -> None:
        """`close`, then wait (off the event loop, `timeout_s` at most) for the relay to reach the pipe's end: the
        lines the process left in the pipe are relayed before its connection is gone, not lost when toolwise exits
        (the thread is a daemon, so that a child holding the pipe open never keeps toolwise from exiting)."""
        self.close()
        await asyncio.to_thread(self.join, timeout_s)

    def _relay(self, pipe: BinaryIO) -> None:
        with pipe:
            # a line at most LINE_BYTES long: a downstream that never ends its line (a progress bar's \r) is
            # relayed in pieces rather than held whole
            for raw in iter(lambda: pipe.readline(LINE_BYTES), b""):
                line = f"[{self.name}] {self.mask(raw.decode('utf-8', 'replace').rstrip())}\n"
                try:
                    sys.stderr.write(line)
                    sys.stderr.flush()
                except (OSError, ValueError):  # toolwise's stderr closed: nowhere to say it; counted, drained
                    self.unwritten += 1
