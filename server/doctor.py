"""`toolwise doctor`: does every downstream of a config start, and does the database open? Each
check says what to fix, so a server that fails inside Claude Desktop can be mended from a terminal."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import dataclass
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from sqlalchemy.engine import make_url

from toolwise.feedback import FeedbackService
from toolwise.server.catalogue import resolve_command
from toolwise.server.config import AppConfig, HttpServer, StdioServer


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str
    fix: str | None = None


def command_found(command: str) -> bool:
    """Whether toolwise would find `command`: on PATH, beside its interpreter, or a path to a file."""
    resolved = resolve_command(command)
    return resolved != command or shutil.which(command) is not None or Path(command).is_file()


async def check_downstream(name: str, spec: StdioServer | HttpServer, config: AppConfig, path: Path) -> Check:
    """Start the server as toolwise would, complete the handshake, count its tools."""
    what = f"server {name!r}"
    if isinstance(spec, StdioServer) and not command_found(spec.command):
        return Check(
            what,
            False,
            f"command {spec.command!r} not found on PATH",
            f"install it (e.g. `pip install {spec.command}` or `npm i -g …`), or give its absolute path as "
            f'"command" of {name!r} in {path}',
        )
    target = (
        spec.url
        if isinstance(spec, HttpServer)
        else StdioServerParameters(command=resolve_command(spec.command), args=spec.args, env=spec.env, cwd=spec.cwd)
    )
    timeout = config.toolwise.start_timeout_s
    try:
        async with asyncio.timeout(timeout), Client(target, mode=config.toolwise.mode) as client:
            count, cursor = 0, None
            while True:
                page = await client.list_tools(cursor=cursor)
                count += len(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
            info = client.server_info
            version = f"{info.name} {info.version}" if info else "no server info"
            return Check(what, True, f"{version}, protocol {client.protocol_version}, {count} tools")
    except TimeoutError:
        return Check(what, False, f"no handshake within {timeout:g}s", "run its command by hand to see why it hangs")
    except Exception as exc:  # noqa: BLE001 - any failure to start is what this check reports
        cause = _leaf(exc)
        return Check(
            what,
            False,
            f"failed to start: {type(cause).__name__}: {cause}",
            "run its command by hand (its error is above), or fix its args/env in " + str(path),
        )


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task groups the SDK wraps a failed start in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def check_database(config: AppConfig) -> Check:
    url = config.toolwise.database_url
    shown = make_url(url).render_as_string(hide_password=True)
    try:
        async with FeedbackService(url) as feedback:
            count = await feedback.log.count_executions(config.toolwise.namespace)
    except Exception as exc:  # noqa: BLE001 - any failure to open is what this check reports
        return Check("database", False, f"{shown}: {type(exc).__name__}: {exc}", "fix database_url (or the server)")
    return Check("database", True, f"{shown}: {count} executions in namespace {config.toolwise.namespace!r}")


async def diagnose(config: AppConfig, path: Path) -> list[Check]:
    checks = await asyncio.gather(*(check_downstream(n, s, config, path) for n, s in config.enabled_servers.items()))
    return [*checks, await check_database(config)]
