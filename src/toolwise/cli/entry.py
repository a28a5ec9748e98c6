"""The `toolwise` command's entry point, importing nothing heavy itself: Ctrl-C while the CLI still imports
(the first half second after Enter) ends the command as Ctrl-C does later, exit 130 with nothing printed,
instead of a traceback of whichever module was importing.

Once the command is done (its threads joined, every atexit handler run: the log flushed, the store closed
by the command itself), the process ends without the interpreter's teardown: freeing the SDK's and
pydantic's classes one by one took 0.5-1.2 s after `serve` had stopped cleanly, a delay every client that
stops toolwise waits out (and every `toolwise --version`)."""

from __future__ import annotations

import atexit
import os
import sys

INTERRUPTED = 130  # 128 + SIGINT: how a shell reports a command that Ctrl-C ended


def main() -> None:
    status = _Status()
    atexit.register(status.end)  # the first registered, so the last run: after every handler registered later
    try:
        from toolwise.cli.main import app
    except KeyboardInterrupt:
        status.code = INTERRUPTED
        sys.exit(INTERRUPTED)
    try:
        app()
    except SystemExit as done:
        status.code = _exit_code(done.code)
        raise
    except KeyboardInterrupt:
        status.code = INTERRUPTED
        raise
    except BaseException:  # the interpreter prints its traceback before the atexit handlers run
        status.code = 1
        raise


class _Status:
    """The exit status the command ended with, for `end` to exit with."""

    code = 0

    def end(self) -> None:
        """Flush what is buffered, then exit at once with the command's status (the teardown skipped)."""
        import logging  # already imported by any command that logged; cheap otherwise

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None and not stream.closed:
                stream.flush()
        os._exit(self.code)


def _exit_code(code: object) -> int:
    """The status `sys.exit(code)` exits with: None is 0, an int itself, anything else (a message) 1."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 1
