"""The `toolwise` command line."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="toolwise",
    help="An MCP proxy that records every tool execution and learns which tool to call next.",
    no_args_is_help=True,
)


@app.callback()
def main() -> None:
    """toolwise: learning MCP proxy."""
