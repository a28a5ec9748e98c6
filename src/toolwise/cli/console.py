"""The console the admin commands (`snapshot`, `inspect`) print on, and a table fitted to its width."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from toolwise.cli.views import Column, fitted_table, natural_width

# a message is one line however long (a path cut by a newline cannot be pasted); tables still fit the width
console = Console(soft_wrap=True)


def console_beside(output: Path) -> Console:
    """The console a command that writes `output` reports on: stderr when `output` is this process's stdout
    (`-o /dev/stdout`, to pipe it on), so that the stream holds what was written and nothing else."""
    try:
        piped = os.path.samestat(os.stat(output), os.fstat(sys.stdout.fileno()))
    except (OSError, ValueError):  # no such file yet, or a stdout with no file behind it (a test's capture)
        piped = False
    return Console(soft_wrap=True, stderr=True) if piped else console


def waiting(on: Console = console) -> Progress:
    """A spinner or bar while a command waits, gone once it is done; none where `on` is no terminal: rich's
    Progress would leave an empty line there, ahead of the command's output on a pipe."""
    return Progress(console=on, transient=True, disable=not on.is_interactive)


def print_fitted(columns: list[Column], rows: list[list[str]], wide: bool, title: str | None = None) -> None:
    """A table at the terminal's width (names shortened in the middle, kept distinct), or whole (`--wide`)."""
    table = fitted_table(columns, rows, None if wide else console.width, title=title)
    if wide:  # rich squeezes a table into its console's width: this one is as wide as the table needs
        Console(width=max(console.width, natural_width(columns, rows))).print(table)
    else:
        console.print(table)


def span(delta: timedelta) -> str:
    seconds = delta.total_seconds()
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.3g} min" if seconds < 7200 else f"{seconds / 3600:.3g} h"
