"""What every command of the CLI shares: the config and database options, loading them, logging to stderr."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from toolwise.feedback import DatabaseUnusableError
from toolwise.server.config import AppConfig, ConfigError, Settings, describe, load_config
from toolwise.server.install import config_dir, installed_configs

EXAMPLE_CONFIG = Path(__file__).resolve().parent.parent / "toolwise.example.json"
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help=f"toolwise config (mcpServers + toolwise). Default: the one `toolwise install` wrote in {config_dir()}.",
    ),
]
DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="Use this database (an SQLAlchemy async URL) instead of the config's; TOOLWISE_DATABASE_URL also does.",
    ),
]


def setup_logging(level: str) -> None:
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Alembic lists its plugins at INFO when imported, which is after this now (when a database opens).
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)


@contextlib.contextmanager
def database_or_exit() -> Iterator[None]:
    """A database that cannot be used stops the command with one message naming it, exit code 2."""
    try:
        yield
    except DatabaseUnusableError as exc:
        typer.echo(f"toolwise: unusable database: {exc}", err=True)
        raise typer.Exit(2) from exc


def default_config() -> Path:
    """The config `toolwise install` wrote, when there is exactly one."""
    found = installed_configs()
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(
            f"no toolwise config in {config_dir()}: run `toolwise install` to make one from your MCP "
            "client's servers, or pass --config FILE"
        )
    names = ", ".join(p.name for p in found)
    raise ConfigError(f"several toolwise configs in {config_dir()} ({names}): pass --config with one of them")


def config_path_or_exit(path: Path | None) -> Path:
    """--config, else the installed config; with neither, a message saying how to get one (exit 2)."""
    if path is not None:
        return path
    try:
        return default_config()
    except ConfigError as exc:
        typer.echo(f"toolwise: {exc}", err=True)
        raise typer.Exit(2) from exc


def config_or_exit(path: Path | None, database_url: str | None = None) -> AppConfig:
    """The config at PATH (default: the installed one), with --database-url over its database."""
    try:
        loaded = load_config(config_path_or_exit(path))
    except ConfigError as exc:
        typer.echo(f"toolwise: invalid config: {exc}", err=True)
        raise typer.Exit(2) from exc
    if database_url is not None:
        loaded.toolwise = loaded.toolwise.model_copy(update={"database_url": database_url})
    return loaded


def settings_or_exit(path: Path | None, database_url: str | None) -> Settings:
    """Settings of a command that reads the database: CONFIG's (default: the installed config, or with
    none the environment's), with --database-url over both."""
    if path is None and not installed_configs():
        try:
            settings = Settings()
        except ValidationError as exc:
            typer.echo(f"toolwise: invalid TOOLWISE_* environment: {describe(exc)}", err=True)
            raise typer.Exit(2) from exc
        return settings if database_url is None else settings.model_copy(update={"database_url": database_url})
    return config_or_exit(path, database_url).toolwise
