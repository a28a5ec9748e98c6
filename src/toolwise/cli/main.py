"""The `toolwise` command line. Logs go to stderr: on stdio, stdout is the protocol."""

from __future__ import annotations

import gc

# Start-up builds hundreds of thousands of objects that live as long as the process (modules, classes,
# validators); the cyclic collector would walk them again and again while they are built.
# Off while this module imports, and for `serve` until it serves (server/heap.py's `settle`).
gc.disable()

import asyncio  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Annotated  # noqa: E402

import typer  # noqa: E402

from toolwise.cli.clients import Client  # noqa: E402
from toolwise.cli.common import (  # noqa: E402
    EXAMPLE_CONFIG,
    EXIT_FOUND,
    ConfigOption,
    DatabaseUrlOption,
    LogLevel,
    checkable_or_exit,
    configs_or_exit,
    database_or_exit,
    fail,
    options,
    servable_or_exit,
    setup_logging,
)
from toolwise.cli.dashboard import dashboard  # noqa: E402
from toolwise.cli.help_text import plain_help  # noqa: E402
from toolwise.cli.inspect_commands import inspect_app  # noqa: E402
from toolwise.cli.installs import InstallError  # noqa: E402
from toolwise.cli.snapshot_commands import snapshot_app  # noqa: E402
from toolwise.config import ConfigError  # noqa: E402

gc.freeze()  # what they built lives on: kept out of the collections from here on (server/heap.py)
gc.enable()

app = typer.Typer(
    name="toolwise",
    help="An MCP proxy that records every tool execution and learns which tool to call next.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(snapshot_app, name="snapshot")
app.add_typer(inspect_app, name="inspect")
app.command()(dashboard)


def _print_version(asked: bool) -> None:
    """`toolwise --version`: the installed distribution's version and where it runs from, as pip says its
    own (a pipx or uv tool install and a clone's .venv carry the same version: the folder tells them
    apart), then exit (before any command runs)."""
    if asked:
        import sys

        import toolwise

        where = Path(toolwise.__file__).parent
        typer.echo(f"toolwise {toolwise.__version__} from {where} (python {sys.version_info[0]}.{sys.version_info[1]})")
        raise typer.Exit()


@app.callback()
def toolwise_options(
    debug: Annotated[
        bool, typer.Option("--debug", help="Show the traceback of a start-up failure, not only its one line.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print toolwise's version and exit."),
    ] = False,
) -> None:
    """An MCP proxy that records every tool execution and learns which tool to call next.

    A start-up failure is one line on stderr with exit code 2 (1: a command ran and found or refused
    something); --debug adds its traceback."""
    options.debug = debug


@app.command()
def serve(
    config: ConfigOption = None,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP instead of stdio.")] = False,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="HTTP port (0: any free one).")] = 8765,
    log_level: Annotated[LogLevel, typer.Option(case_sensitive=False, help="Log level (to stderr).")] = LogLevel.info,
    database_url: DatabaseUrlOption = None,
    transport: Annotated[str | None, typer.Option("--transport", hidden=True)] = None,
) -> None:
    """Run the toolwise MCP server over the downstream servers of CONFIG (default: the installed one)."""
    if transport is not None:  # other MCP servers' option: said, rather than click's "did you mean --port"
        fail(
            f"serve has no --transport (given {transport!r}): it speaks stdio, as a client that starts it expects, "
            "or streamable HTTP at http://HOST:PORT/mcp with --http (no SSE)"
        )
    gc.disable()  # until it serves: the rest of toolwise imports after the downstreams are spawned
    try:
        from toolwise.server.transports import BindError, Stopped, listening_socket, serve_http, serve_stdio

        setup_logging(log_level.value)
        path, loaded = servable_or_exit(config, database_url)
        listening = listening_socket(host, port) if http else None
        logging.getLogger(__name__).info("toolwise serving the config %s", path)
        if listening is None:
            _say_stdio_if_typed()
        with database_or_exit():
            asyncio.run(serve_stdio(loaded) if listening is None else serve_http(loaded, host, listening))
    except (ConfigError, BindError) as exc:  # found before serving (a non-loopback bind without a token, a busy port)
        fail(str(exc), exc)
    except (KeyboardInterrupt, Stopped):
        # Ctrl-C (or a SIGINT re-raised by uvicorn), or a stop signal while it started, is how a server is
        # stopped: asyncio.run has already cancelled the server and run its shutdown, which flushed every
        # queued record, and killed the downstreams of a start given up.
        logging.getLogger(__name__).info("toolwise stopped")
    finally:
        gc.enable()  # serving turned it on already (server/heap.py's `settle`); not if it stopped before


def _say_stdio_if_typed() -> None:
    """Typed in a terminal, `serve` would wait in silence for a client's messages: say what it is for, on
    stderr (stdout is the protocol)."""
    if sys.stdin.isatty():
        typer.echo(
            "toolwise speaks MCP over stdin/stdout: an MCP client starts it (`toolwise install` adds it to "
            "your client's config, or name this command in that config). Waiting for a client's messages; "
            "Ctrl-C stops it.",
            err=True,
        )


@app.command()
def demo(
    config: Annotated[
        Path, typer.Option("--config", "-c", help="toolwise config to run the demo on (default: the example).")
    ] = EXAMPLE_CONFIG,
    calls: Annotated[int, typer.Option(min=1, help="How many tool calls the scripted agent makes.")] = 300,
    seed: Annotated[int, typer.Option(help="Seed of the scripted agent and of toolwise.")] = 7,
    database_url: Annotated[
        str | None,
        typer.Option(help="Record into this database, not demo.db in the data dir (made afresh each run)."),
    ] = None,
) -> None:
    """Run toolwise on CONFIG, drive a scripted agent through a real MCP client, and show what it learned."""
    from toolwise.cli.demo import DemoError, run_demo

    setup_logging("warning")
    _, loaded = servable_or_exit(config, command="demo")
    try:
        with database_or_exit():
            asyncio.run(run_demo(config.absolute(), loaded, calls, seed, database_url))  # printed absolute
    except DemoError as exc:
        fail(f"demo: {exc}", exc, EXIT_FOUND)


@app.command()
def install(
    client: Annotated[
        Client | None,
        typer.Option(
            help="The MCP client whose servers toolwise goes in front of; by default the one --path's file belongs "
            "to (.mcp.json: claude-code; .cursor/mcp.json: cursor), else claude-desktop.",
            show_default=False,
        ),
    ] = None,
    path: Annotated[
        Path | None, typer.Option(help="The client's config file, if not where it keeps it (e.g. a .mcp.json).")
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the diff, write nothing.")] = False,
    undo: Annotated[bool, typer.Option("--undo", help="Put the client's config back as it was.")] = False,
) -> None:
    """Put toolwise in front of the MCP servers of Claude Desktop, Claude Code or Cursor.

    The client's servers move into a toolwise config and the client gets one toolwise entry instead;
    a timestamped backup is kept and --undo restores it.
    """
    from toolwise.cli.install import run

    try:
        run(client, path, dry_run, undo)
    except InstallError as exc:
        fail(str(exc), exc, EXIT_FOUND)


@app.command()
def doctor(config: ConfigOption = None, database_url: DatabaseUrlOption = None) -> None:
    """Check that every downstream starts and the database opens, and say what to fix.

    Per downstream: its command is found, the handshake completes (name, version, protocol) and its
    tools are listed; an SQLite database gets the full integrity check. Exits 1 when something is wrong.
    """
    from toolwise.cli.doctor import report

    setup_logging("error")
    failed, checked, servers = 0, set(), 0
    for path in configs_or_exit(config):  # without --config, every config a client serves
        loaded = checkable_or_exit(path, database_url)
        database = (loaded.toolwise.database_url, loaded.toolwise.namespace)
        failed += report(path, loaded, database not in checked)
        checked.add(database)
        servers += len(loaded.enabled_servers)
    if failed:
        typer.echo(f"{failed} problem(s) found")
    else:  # with no server to start, toolwise would offer its own tools alone
        typer.echo("everything starts" if servers else "no server to start: toolwise would serve its own tools alone")
    if failed:
        raise typer.Exit(EXIT_FOUND)


@app.command("import-dead-letters")
def import_dead_letters(
    files: Annotated[list[Path], typer.Argument(help="Dead-letter files (JSON Lines) to put back.")],
    config: ConfigOption = None,
    database_url: DatabaseUrlOption = None,
) -> None:
    """Put the executions of dead-letter files back into the database (those already there are skipped).

    toolwise writes a call the database refused (a full disk, a deleted file) to a dead-letter file, and
    names that file in an error; once the database takes records again, this returns them to the log.
    """
    from toolwise.cli.database import run
    from toolwise.config import Settings
    from toolwise.errors import UserError
    from toolwise.feedback import FeedbackService
    from toolwise.feedback.deadletter import read_dead_letters

    letters = {}
    for file in files:  # every file read before the database is opened or made
        if not file.is_file():
            fail(f"no dead-letter file at {file}")
        try:
            letters[file] = list(read_dead_letters(file))
        except UserError as exc:
            fail(str(exc), exc)

    async def work(_settings: Settings, feedback: FeedbackService) -> None:
        for file, rows in letters.items():
            imported, known = await feedback.import_dead_letter_rows(rows)
            typer.echo(f"{file}: {imported} executions imported, {known} already in the database")

    run(config, work, database_url, create=True)


plain_help(app)  # once every command is registered
