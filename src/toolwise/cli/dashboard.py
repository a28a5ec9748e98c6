"""`toolwise dashboard`: the dashboard of a database (a shared PostgreSQL, a copied SQLite file) without
serving MCP, on loopback unless told otherwise; it prints the address to open."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from toolwise.cli.common import (
    ConfigOption,
    DatabaseUrlOption,
    LogLevel,
    database_or_exit,
    fail,
    settings_or_exit,
    setup_logging,
)
from toolwise.cli.database import sqlite_file_or_exit
from toolwise.config import ConfigError


def dashboard(
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
    host: Annotated[str, typer.Option(help="Bind address (another than loopback needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8766,
    log_level: Annotated[
        LogLevel, typer.Option(case_sensitive=False, help="Log level (to stderr).")
    ] = LogLevel.warning,
) -> None:
    """Serve the dashboard of CONFIG's database (or --database-url) at http://HOST:PORT/dashboard.

    With a token (TOOLWISE_HTTP_TOKEN or http_token_file), open the address once with ?token=<the token>
    added: it sets a cookie for the dashboard and drops the token from the address. The token itself is
    never printed."""
    from toolwise.server.auth import DASHBOARD, http_access, shown_host
    from toolwise.server.dashboard_http import serve_dashboard
    from toolwise.server.transports import BindError, listening_socket

    setup_logging(log_level.value)
    settings = settings_or_exit(config, database_url)
    try:
        access = http_access(host, settings, "read what toolwise recorded (tools, calls, sessions)")
        listening = listening_socket(host, port)
    except (ConfigError, BindError) as exc:
        fail(str(exc), exc)
    sqlite_file_or_exit(settings.database_url, must_exist=True)  # it only reads, as `inspect` does
    url = f"http://{shown_host(host)}:{listening.getsockname()[1]}{DASHBOARD}"
    typer.echo(url)
    if access.token:
        typer.echo("open it once as …/dashboard?token=<your token> (it sets a cookie for the dashboard)", err=True)
    try:
        with database_or_exit():
            asyncio.run(serve_dashboard(settings, host, listening, access))
    except KeyboardInterrupt:
        typer.echo("toolwise dashboard stopped", err=True)
