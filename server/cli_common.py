"""What every command of the CLI shares: the config option, loading it, logging to stderr."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from toolwise.feedback import DatabaseUnusableError
from toolwise.server.config import AppConfig, ConfigError, load_config

EXAMPLE_CONFIG = Path(__file__).resolve().parent.parent / "claude_desktop_config.example.json"
ConfigOption = Annotated[
    Path, typer.Option("--config", "-c", help="Config file in the Claude Desktop shape (mcpServers + toolwise).")
]


def setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


@contextlib.contextmanager
def database_or_exit() -> Iterator[None]:
    """A database that cannot be used stops the command with one message naming it, exit code 2."""
    try:
        yield
    except DatabaseUnusableError as exc:
        typer.echo(f"toolwise: unusable database: {exc}", err=True)
        raise typer.Exit(2) from exc


def config_or_exit(path: Path) -> AppConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        typer.echo(f"toolwise: invalid config: {exc}", err=True)
        raise typer.Exit(2) from exc
