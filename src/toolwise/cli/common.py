"""What every command of the CLI shares: the config and database options, loading them, logging to stderr,
and how a start-up failure a user can cause ends a command: one line on stderr, a documented exit code
(docs/startup-errors.md), the traceback only under `toolwise --debug`."""

from __future__ import annotations

import contextlib
import enum
import errno
import json
import logging
import os
import sys
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import ValidationError

from toolwise.cli.clients import installed_configs, is_toolwise, served_config, served_configs
from toolwise.cli.installs import InstallError, config_dir
from toolwise.config import AppConfig, ConfigError, Settings, describe, load_config, settings_of
from toolwise.feedback import DatabaseUnusableError
from toolwise.feedback.arguments import masked_text
from toolwise.feedback.files import open_private

# Exit codes (docs/startup-errors.md): 1 a command ran and found or refused something (doctor's
# problems, install's refusals, the demo); 2 toolwise could not start because of something the user
# can change (config, database, data folder, HTTP bind).
EXIT_FOUND = 1
EXIT_STARTUP = 2


@dataclass
class Options:
    """The options of `toolwise` itself (before the command), set by its callback."""

    debug: bool = False


options = Options()


def fail(message: str, exc: BaseException | None = None, code: int = EXIT_STARTUP) -> NoReturn:
    """End the command with `toolwise: MESSAGE` on stderr and exit `code` (the traceback under --debug)."""
    if exc is not None and options.debug:
        traceback.print_exception(exc, file=sys.stderr)
    typer.echo(f"toolwise: {message}", err=True)
    raise typer.Exit(code) from exc


def output_or_exit(path: Path, *, makes_folder: bool = False) -> None:
    """A file a command will write, checked before its database is opened: a folder in its place, or a
    folder it would go in that does not exist (unless the command `makes_folder`), ends the command in one
    line naming it, exit 2, before anything is computed or created."""
    if path.is_dir():
        fail(f"{path} is a folder: name the file to write in it, e.g. {path / 'out'}")
    if not makes_folder and not path.parent.is_dir():
        fail(f"cannot write {path}: there is no folder {path.parent}; make it first, or name a file in one that exists")


_CUT_SHORT = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)  # a write refused midway, not an open


@contextlib.contextmanager
def writing(output: Path) -> Iterator[None]:
    """A command writing its output file: a write that fails (a full disk, a quota, no permission) ends the
    command in one line naming the file, exit 2; what a full disk cut short is removed (it would pass for the
    whole), a file that could not be opened is left as it was. Every OSError of the block is taken for the
    file's: a command that reads its database between writes writes through `output_between_reads`."""
    try:
        yield
    except OSError as exc:
        _cannot_write(output, exc)


def _cannot_write(output: Path, exc: OSError) -> NoReturn:
    if exc.errno in _CUT_SHORT and output.is_file():
        output.unlink(missing_ok=True)
    fail(f"cannot write {output}: {exc.strerror or exc}", exc)


class _WriteFailed(Exception):
    """An OSError (the cause) of opening, writing or closing an output written between reads."""


class Output:
    """An output file opened private (`open_private`) whose own failures are `_WriteFailed`, told apart from
    the OSErrors of the reads between its writes."""

    def __init__(self, path: Path) -> None:
        try:
            self._file = open_private(path)
        except OSError as exc:
            raise _WriteFailed from exc

    def write(self, data: bytes) -> None:
        try:
            self._file.write(data)
        except OSError as exc:
            raise _WriteFailed from exc

    def writelines(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            self.write(line)

    def close(self) -> None:
        try:
            self._file.close()  # flushes what is buffered: a full disk may show here
        except OSError as exc:
            raise _WriteFailed from exc


@contextlib.contextmanager
def output_between_reads(output: Path) -> Iterator[Output]:
    """`writing` for a command that reads its database between writes (an export): only a failing open, write
    or close of `output` ends it naming the file; an OSError of a read (a lost PostgreSQL server, which
    SQLAlchemy does not wrap) goes on to `database.run`, which names the database. What a failing read cut
    short is removed, as what a full disk did: it would pass for the whole."""
    try:
        out = Output(output)
        try:
            yield out
        finally:
            out.close()
    except _WriteFailed as exc:
        assert isinstance(exc.__cause__, OSError)  # always raised from one
        _cannot_write(output, exc.__cause__)
    except BaseException:
        if output.is_file():  # not a stream (`-o /dev/stdout`)
            output.unlink(missing_ok=True)
        raise


def install_beside_toolwise(packages: list[str]) -> str:
    """The command that adds Python packages to the environment this toolwise runs in: its tool manager's
    (`pipx inject`; `uv pip` aimed at its interpreter, since uv's tool environments have no pip), else that
    environment's own pip. Never the shell's `pip`, which installs elsewhere, nor `pip install
    'toolwise[extra]'`: toolwise is installed from its checkout, and a registry's `toolwise` is not it."""
    prefix = Path(sys.prefix)
    if (prefix / "uv-receipt.toml").exists():
        return f"uv pip install --python {sys.executable} {' '.join(packages)}"
    if (prefix / "pipx_metadata.json").exists():
        return f"pipx inject toolwise {' '.join(packages)}"
    return f"{sys.executable} -m pip install {' '.join(packages)}"


# The demo's default config, shipped in the package (a pipx or uv tool install has no checkout); the
# checkout's root holds the same file for the README (tests/cli/test_packaged.py keeps them equal).
EXAMPLE_CONFIG = Path(__file__).resolve().parent / "toolwise.example.json"
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
WideOption = Annotated[bool, typer.Option("--wide", help="Full tool names, however wide the table gets.")]


class LogLevel(enum.StrEnum):
    """`--log-level`: a name logging knows, checked as the command line is read (any other was a traceback)."""

    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


def setup_logging(level: str) -> None:
    """Logs to stderr, which a client shows as the server's MCP log. Alembic's INFO (its plugins, and a line
    per revision a first start runs) only under `--debug` or a debug level: toolwise says in one line of
    its own when it made or upgraded the schema. The HTTP clients' INFO (a line per request to an HTTP
    downstream, its URL whole: a hosted server's often holds its key) likewise."""
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    stderr.addFilter(SecretsMasked())
    logging.basicConfig(level=level.upper(), handlers=[stderr])
    debugging = options.debug or logging.getLevelName(level.upper()) == logging.DEBUG
    for chatty in ("alembic", "httpx", "httpx2"):
        logging.getLogger(chatty).setLevel(logging.NOTSET if debugging else logging.WARNING)


class SecretsMasked(logging.Filter):
    """Each line logged with its secret-shaped parts masked (a key in a URL's query, a password in it, a bearer
    token, a provider's token shape): at a debug level the SDK and the HTTP clients log a downstream's URL whole,
    and a client keeps stderr in a file (Claude Desktop's `mcp-server-toolwise.log`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = masked_text(message)  # not remembered: log lines would crowd the calls' texts out of the memo
        if masked != message:
            record.msg, record.args = masked, None
        return True


@contextlib.contextmanager
def database_or_exit() -> Iterator[None]:
    """A database that cannot be used stops the command with one message naming it, exit code 2."""
    try:
        yield
    except DatabaseUnusableError as exc:
        fail(f"unusable database: {exc}", exc)


def _this_command() -> str:
    """The command being run, without its options (`toolwise inspect status`), to show how to rerun it."""
    words = ["toolwise"]
    for arg in sys.argv[1:]:
        if arg.startswith("-"):
            if len(words) > 1:
                break
            continue  # toolwise's own options (--debug)
        words.append(arg)
    return " ".join(words)


def default_config() -> Path:
    """The config `toolwise install` wrote: the one an installed client serves, or the only file in the
    config folder. Configs an `install --undo` left behind are not "installed"."""
    try:
        served = served_configs()
    except InstallError as exc:  # installs.json broken
        raise ConfigError(f"{exc}; fix or delete it, or pass --config FILE") from exc
    if len(served) == 1:
        return next(iter(served))
    if len(served) > 1:
        listed = ", ".join(f"{p.name} (for {client})" for p, client in served.items())
        raise ConfigError(
            f"several toolwise configs are installed: {listed}; name one, e.g. "
            f"`{_this_command()} --config {next(iter(served))}`"
        )
    found = installed_configs()
    if len(found) == 1:
        return found[0]
    if not found:
        raise ConfigError(
            f"no toolwise config in {config_dir()}: run `toolwise install` to make one from your MCP "
            "client's servers, or pass --config FILE"
        )
    names = ", ".join(p.name for p in found)
    raise ConfigError(
        f"no client serves a toolwise config now ({names} in {config_dir()} were left by `toolwise install "
        f"--undo`): run `toolwise install` again, or name one, e.g. `{_this_command()} --config {found[0]}`"
    )


def served_or_none() -> dict[Path, str]:
    """served_configs(), or none when installs.json is broken (default_config() then says so)."""
    try:
        return served_configs()
    except InstallError:
        return {}


def configs_or_exit(path: Path | None) -> list[Path]:
    """--config, else every config a client serves (a Claude Code user scope's and each project's), else
    the installed one: a check of "every server" (doctor) checks them all rather than asking for one."""
    if path is None and len(served := served_or_none()) > 1:
        return list(served)
    return [config_path_or_exit(path)]


def shared_settings(paths: list[Path]) -> Settings | None:
    """The settings all of `paths` have, when they are the same (the configs `install` writes for a client's
    scopes differ only in their servers): a command that reads only the database then needs no choice."""
    try:
        each = [load_config(path, unset_kept=True).toolwise for path in paths]
    except ConfigError:
        return None
    return each[0] if all(settings == each[0] for settings in each) else None


def config_path_or_exit(path: Path | None) -> Path:
    """--config, else the installed config; with neither, a message saying how to get one (exit 2)."""
    if path is not None:
        return path
    try:
        return default_config()
    except ConfigError as exc:
        fail(str(exc), exc)


def config_or_exit(path: Path | None, database_url: str | None = None, *, unset_kept: bool = False) -> AppConfig:
    """The config at PATH (default: the installed one), with --database-url over its database (`unset_kept`:
    load_config's, for a command that starts no server, or doctor, which checks each server's variables itself)."""
    try:
        loaded = load_config(config_path_or_exit(path), unset_kept=unset_kept)
    except ConfigError as exc:
        fail(f"invalid config: {exc}", exc)
    if database_url is None:
        return loaded
    return loaded.model_copy(update={"toolwise": loaded.toolwise.model_copy(update={"database_url": database_url})})


def servable_or_exit(
    path: Path | None, database_url: str | None = None, command: str = "serve"
) -> tuple[Path, AppConfig]:
    """The config `serve` (or the demo) runs, and its path: config_or_exit's, refused when one of its servers
    starts toolwise itself (a client's own config, after `toolwise install` put toolwise in it), which would
    run toolwise inside toolwise on the same database: one line naming the config to serve instead, exit 2."""
    path = config_path_or_exit(path)
    refuse_client_config(path, command, "serving it would run toolwise inside toolwise on the same database")
    return path, config_or_exit(path, database_url)


def checkable_or_exit(path: Path, database_url: str | None = None) -> AppConfig:
    """The config `doctor` checks: config_or_exit's, its unset `${VAR}`s kept as written (each its server's FAIL:
    `doctor.check_downstream`), except that a client's own config toolwise cannot load (an SSE entry beside
    toolwise's) is said to be the client's, naming the config to check instead, exit 2 (one it can load, doctor
    reports its toolwise entry as a FAIL, not started)."""
    try:
        load_config(path, unset_kept=True)
    except ConfigError as exc:  # what is wrong with it said too: a toolwise config may serve toolwise on purpose
        refuse_client_config(path, "doctor", f"toolwise cannot check it ({exc})", verb="check")
    return config_or_exit(path, database_url, unset_kept=True)  # an unset ${VAR}: its server's FAIL (doctor.py)


def refuse_client_config(path: Path, command: str, why: str, verb: str | None = None) -> None:
    """End the command in one line (exit 2) when one of `path`'s servers starts toolwise itself: a client's
    own config, after `toolwise install` put toolwise in it; naming the toolwise config to `command` instead."""
    for name, entry in _toolwise_entries(path).items():
        instead = config_instead(path, entry)
        use = (
            f"{verb or command} toolwise's own config instead: `toolwise {command} --config {instead}`"
            if instead
            else "make a toolwise config with `toolwise install`, or pass --config FILE with one"
        )
        fail(
            f"{path} is an MCP client's config, not toolwise's: its server {name!r} starts toolwise itself, "
            f"and {why}; {use}"
        )


def _toolwise_entries(path: Path) -> dict[str, dict[str, Any]]:
    """The servers of the file, as written, that start toolwise and are not `"disabled": true`; none when it
    cannot be read or parsed (load_config then says what is wrong with it, in its own words)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return {}
    servers = raw.get("mcpServers") if isinstance(raw, dict) else None
    if not isinstance(servers, dict):
        return {}
    return {name: e for name, e in servers.items() if is_toolwise(e) and e.get("disabled") is not True}


def config_instead(path: Path, entry: dict[str, Any]) -> Path | None:
    """The toolwise config to use in place of the client config at `path` whose `entry` starts toolwise:
    the one the entry serves (`--config X`), else the installed one; None when there is neither."""
    named = served_config(entry)
    if named is not None and named.exists() and named.absolute() != path.absolute():
        return named
    try:
        found = default_config()
    except ConfigError:
        return None
    return found if found.absolute() != path.absolute() else None


def settings_or_exit(path: Path | None, database_url: str | None) -> Settings:
    """Settings of a command that reads the database: CONFIG's (default: the installed config), with
    --database-url over it. With several installed, the settings they share (a client's scopes); with
    none, or several that differ and --database-url given (which is all such a command needs), the
    environment's."""
    if path is None and len(served := served_or_none()) > 1 and (shared := shared_settings(list(served))):
        return shared if database_url is None else shared.model_copy(update={"database_url": database_url})
    if path is None:
        try:
            path = default_config()
        except ConfigError as exc:
            if database_url is None and installed_configs():
                fail(str(exc), exc)
    if path is None:
        try:
            settings = settings_of({})
        except ValidationError as exc:
            fail(f"invalid TOOLWISE_* environment: {describe(exc, os.environ)}", exc)
        except ConfigError as exc:
            fail(f"invalid TOOLWISE_* environment: {exc}", exc)
        return settings if database_url is None else settings.model_copy(update={"database_url": database_url})
    return config_or_exit(path, database_url, unset_kept=True).toolwise
