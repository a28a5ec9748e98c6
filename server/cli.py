"""The `toolwise` command line. Logs go to stderr: on stdio, stdout is the protocol."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated

import typer

from toolwise.server.admin import inspect_app, snapshot_app
from toolwise.server.cli_common import EXAMPLE_CONFIG, ConfigOption, config_or_exit, database_or_exit, setup_logging

app = typer.Typer(
    name="toolwise",
    help="An MCP proxy that records every tool execution and learns which tool to call next.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(snapshot_app, name="snapshot")
app.add_typer(inspect_app, name="inspect")


@app.command()
def serve(
    config: ConfigOption = EXAMPLE_CONFIG,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8765,
    log_level: Annotated[str, typer.Option(help="Log level (to stderr).")] = "info",
) -> None:
    """Run the toolwise MCP server over the downstream servers of CONFIG."""
    from toolwise.server.transports import serve_http, serve_stdio

    setup_logging(log_level)
    loaded = config_or_exit(config)
    try:
        with database_or_exit():
            asyncio.run(serve_http(loaded, host, port) if http else serve_stdio(loaded))
    except KeyboardInterrupt:
        # Ctrl-C (or a SIGINT re-raised by uvicorn) is how a server is stopped: asyncio.run has
        # already cancelled the server and run its shutdown, which flushed every queued record.
        logging.getLogger(__name__).info("toolwise stopped")


@app.command()
def demo(
    config: ConfigOption = EXAMPLE_CONFIG,
    calls: Annotated[int, typer.Option(help="How many tool calls the scripted agent makes.")] = 300,
    seed: Annotated[int, typer.Option(help="Seed of the scripted agent and of toolwise.")] = 7,
    database_url: Annotated[
        str | None,
        typer.Option(help="Record into this database (kept, e.g. for `toolwise inspect`) not a scratch one."),
    ] = None,
) -> None:
    """Run toolwise on CONFIG, drive a scripted agent through a real MCP client, and show what it learned."""
    from toolwise.server.demo import run_demo

    setup_logging("warning")
    config_or_exit(config)
    asyncio.run(run_demo(config, calls, seed, database_url))


def main() -> None:
    app()
