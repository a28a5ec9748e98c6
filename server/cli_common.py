"""What every command of the CLI shares: the config option, loading it, logging to stderr."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer

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


def config_or_exit(path: Path) -> AppConfig:
    try:
        return load_config(path)
    except ConfigError as exc:
        typer.echo(f"toolwise: invalid config: {exc}", err=True)
        raise typer.Exit(2) from exc
