"""The `toolwise` command's entry point, importing nothing heavy itself: Ctrl-C while the CLI still imports
(the first half second after Enter) ends the command as Ctrl-C does later, exit 130 with nothing printed,
instead of a traceback of whichever module was importing."""

from __future__ import annotations

import sys

INTERRUPTED = 130  # 128 + SIGINT: how a shell reports a command that Ctrl-C ended


def main() -> None:
    try:
        from toolwise.cli.main import app
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)
    app()
