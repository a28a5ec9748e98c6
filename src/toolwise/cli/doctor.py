"""`toolwise doctor`: does every downstream of a config start, and does the database open (and is its file
sound)? Each check says what to fix, so a server that fails inside Claude Desktop can be mended from a
terminal."""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import os
import re
import shlex
import sqlite3
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from toolwise import sdk
from toolwise.cli.clients import is_toolwise
from toolwise.cli.common import config_instead
from toolwise.cli.masked import mask_args
from toolwise.config import EXPANDED, AppConfig, ConfigError, HttpServer, StdioServer, closest, expand_variables
from toolwise.downstream.environment import (
    command_found,
    command_line,
    downstream_environment,
    provider_of,
    resolve_command,
)
from toolwise.downstream.failures import describe, recording_spawns, refusal, refused_why
from toolwise.downstream.listing import all_tools
from toolwise.downstream.naming import namespaced
from toolwise.downstream.selection import lets_through, matching_none, unmatched
from toolwise.downstream.targets import MAX_EVENT
from toolwise.feedback import DatabaseUnusableError, FeedbackService, shown_url
from toolwise.feedback.arguments import names_secret
from toolwise.feedback.engine import sqlite_path
from toolwise.feedback.integrity import check_file, recovery
from toolwise.server.discovery import CALL_TOOL, SEARCH_TOOLS
from toolwise.server.tools import own_tools


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str
    fix: str | None = None
    tools: tuple[str, ...] = ()  # a server that started: the names toolwise lists its offered tools under


def near_commands(command: str) -> list[str]:
    """Commands on PATH (or beside this interpreter) whose names are close to a misspelt `command`."""
    folders = [*os.environ.get("PATH", "").split(os.pathsep), str(Path(sys.executable).parent)]
    names: set[str] = set()
    for folder in filter(None, folders):
        with contextlib.suppress(OSError):  # a PATH entry that is missing or unreadable offers nothing
            names.update(entry.name for entry in os.scandir(folder) if os.access(entry.path, os.X_OK))
    return difflib.get_close_matches(Path(command).name, sorted(names), n=1, cutoff=0.8)


def missing_command(name: str, spec: StdioServer, path: Path) -> Check:
    """A command found nowhere: what provides a well-known launcher, else the near miss, if there is one;
    never a package to install by its name (a misspelt name installed from a registry is someone else's)."""
    if words := command_line(spec.command):
        args = json.dumps([*words[1:], *spec.args])
        fix = f'"command" of {name!r} holds a whole command line: give "command": {json.dumps(words[0])} and '
        fix += f'"args": {args} in {path}'
        return Check(f"server {name!r}", False, f'command {words[0]!r} written with its arguments in "command"', fix)
    if (Path(spec.cwd or ".") / spec.command).is_dir():
        fix = f'give the program that starts the server as "command" of {name!r} in {path} (its README says which)'
        return Check(f"server {name!r}", False, f"command {spec.command!r} is a folder, not a program", fix)
    near = near_commands(spec.command)
    launcher = provider_of(spec.command)
    if launcher:
        fix = (
            f'{spec.command!r} comes with {launcher}: install that, or give its path as "command" of {name!r} in {path}'
        )
    elif near:
        fix = f'did you mean {near[0]!r}? Correct "command" of {name!r} in {path}'
    else:
        fix = (
            f"install it (its server's README names the package that provides {spec.command!r}), or give its "
            f'absolute path as "command" of {name!r} in {path}'
        )
    return Check(f"server {name!r}", False, f"command {spec.command!r} not found on PATH", fix)


async def start(
    target: StdioServerParameters | HttpServer, config: AppConfig, errlog: TextIO | None
) -> tuple[str, list[str]]:
    """Start (or reach) a downstream, complete the handshake, list its tools: what it says about itself,
    and its tools' names."""
    async with contextlib.AsyncExitStack() as stack:
        if isinstance(target, StdioServerParameters):
            transport: Any = stdio_client(target, errlog=errlog or sys.stderr)
        else:  # its headers on every request, and answers as large, as the catalogue sends and reads them
            http = await stack.enter_async_context(sdk.http_client(headers=target.headers or None))
            transport = streamable_http_client(target.url, http_client=http, max_sse_event_size=MAX_EVENT)
        client = await stack.enter_async_context(Client(transport, mode=config.toolwise.mode))
        names = [tool.name for tool in await all_tools(client)]
        info = client.server_info
        summary = f"{info.name if info else 'no server info'} {info.version if info else ''}".rstrip()
        protocol = client.protocol_version
    return f"{summary}, protocol {protocol}", names


def started(name: str, spec: StdioServer | HttpServer, path: Path, said: tuple[str, list[str]]) -> Check:
    """The check of a server that started: its tools, and how many its `includeTools` / `excludeTools`
    offer; a name in either that matches none of its tools (a typo: it offers nothing, or hides nothing)
    fails, naming the nearest tool."""
    summary, names = said
    detail = f"{summary}, {len(names)} tools"
    offered = tuple(namespaced(name if spec.prefix is None else spec.prefix, t) for t in names if lets_through(spec, t))
    if spec.include_tools is None and not spec.exclude_tools:
        return Check(f"server {name!r}", True, detail, tools=offered)
    detail += f", {len(offered)} offered"
    unknown = unmatched(spec, names)
    if not unknown:
        return Check(f"server {name!r}", True, detail, tools=offered)
    wrong = "; ".join(f"{key} names no tool it lists: {', '.join(patterns)}" for key, patterns in unknown.items())
    where = f"{' and '.join(unknown)} of {name!r} in {path} (its tools: {', '.join(names) or 'none'})"
    return Check(
        f"server {name!r}",
        False,
        f"{detail}; {wrong}",
        correct(where, [p for ps in unknown.values() for p in ps], names),
    )


def correct(where: str, wrong: list[str], names: list[str]) -> str:
    """What to fix for names that match no tool: the nearest tool of each, where there is one, then where."""
    near = [f"{n!r} for {w!r}" for w in wrong if (n := closest(w, names))]
    return f"did you mean {', '.join(near)}? Correct {where}" if near else f"correct {where}"


async def check_downstream(name: str, spec: StdioServer | HttpServer, config: AppConfig, path: Path) -> Check:
    """Start the server as toolwise would (the same command, arguments and environment), complete the
    handshake, count its tools; when it does not start, say what it lacks."""
    what = f"server {name!r}"
    try:  # loaded with its unset ${VAR}s kept as written (`checkable_or_exit`): this server's problem alone
        expand_variables({name: spec.model_dump(include=set(EXPANDED))}, os.environ)
    except ConfigError as exc:
        return Check(what, False, f"not started: {exc}")
    if isinstance(spec, HttpServer):
        return await _check_http(name, spec, config, path)
    if is_toolwise(entry := {"command": spec.command, "args": spec.args}):  # not started: toolwise inside toolwise
        instead = config_instead(path, entry)
        fix = (
            f"check the config it serves: `toolwise doctor --config {instead}`" if instead else "run `toolwise install`"
        )
        return Check(what, False, f"starts toolwise itself: {path} is an MCP client's config, not toolwise's", fix)
    if not command_found(spec.command, spec.cwd):
        return missing_command(name, spec, path)
    timeout = config.toolwise.start_timeout_s
    params = stdio_parameters(spec, downstream_environment(spec.env))
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog, recording_spawns() as spawned:
        try:
            async with asyncio.timeout(timeout):
                return started(name, spec, path, await start(params, config, errlog))
        except TimeoutError:
            detail = f"no handshake within {timeout:g}s"
        except Exception as exc:  # noqa: BLE001 - any failure to start is what this check reports
            status = await _exit_status(spawned)  # said as serve's log says it
            detail = f"failed to start: {describe(exc, starting=True, start_timeout_s=timeout, exit_status=status)}"
        errlog.seek(0)
        said = [line.strip() for line in errlog.read().splitlines() if line.strip()]
    if said:
        detail += f"; it said: {said[-1]}"
    return Check(what, False, detail, await _what_it_lacks(name, spec, config, path, said))


async def _check_http(name: str, spec: HttpServer, config: AppConfig, path: Path) -> Check:
    what, timeout = f"server {name!r}", config.toolwise.start_timeout_s
    try:
        async with asyncio.timeout(timeout):
            return started(name, spec, path, await start(spec, config, None))
    except TimeoutError:
        detail = f"no answer to initialize within {timeout:g}s"
    except Exception as exc:  # noqa: BLE001 - any failure to connect is what this check reports
        if status := await refused_with(spec):
            given = any(names_secret(header) for header in spec.headers or {})
            fix = f'check that token, in its "headers" in {path}' if given else _token_fix(path)
            return Check(what, False, f"{spec.url} answered {status}: {refused_why(spec.headers)}", fix)
        detail = f"cannot connect to {spec.url}: {_describe(exc)}"
    fix = f'check that the server at {spec.url} is running, and its "url" and "headers" in {path}'
    return Check(what, False, detail, fix)


async def refused_with(spec: HttpServer) -> str | None:
    """ "401 Unauthorized" or "403 Forbidden" when the server refuses an MCP initialize so (the SDK's
    error does not say); None otherwise, an unreachable server included (the error said that)."""
    import httpx2

    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    try:
        async with sdk.http_client(headers=spec.headers or None) as http:
            answer = await http.post(spec.url, json=hello, headers=accept)
    except httpx2.HTTPError:
        return None
    return refusal(answer.status_code, answer.reason_phrase)


def _token_fix(path: Path) -> str:
    return (
        f'give it its token, as an "Authorization" header in its "headers" in {path} ("Bearer ${{ITS_TOKEN}}"); '
        "toolwise signs in to no server by OAuth: one the client signed in to belongs with the client "
        "(move it back into the client's config)"
    )


def stdio_parameters(spec: StdioServer, env: dict[str, str]) -> StdioServerParameters:
    return StdioServerParameters(
        command=resolve_command(spec.command, env.get("PATH")), args=spec.args, env=env, cwd=spec.cwd
    )


_NOT_FOUND = re.compile(r"'?([\w.+-]+)'?: (?:No such file or directory|command not found|not found)\s*$")


async def _what_it_lacks(name: str, spec: StdioServer, config: AppConfig, path: Path, said: list[str]) -> str:
    """The fix for a server that does not start: the command its own last line says is missing, else
    the variables of this shell it needs and toolwise does not pass (found by starting it again with
    them, halving the candidates), else its own message."""
    missing = _NOT_FOUND.search(said[-1]) if said else None
    if missing and not command_found(missing.group(1)):
        return (
            f"it runs {missing.group(1)!r}, which is not on the PATH toolwise gives it: install it, or add its "
            f'folder to "PATH" in the "env" of {name!r} in {path}'
        )
    needed = await needed_variables(spec, config)
    if len(needed) > 5:  # the probes ran out before narrowing them down
        return (
            "it starts with your shell's environment, not with the one toolwise gives it: it needs some of "
            f'{", ".join(needed[:5])}, … ({len(needed)} variables); add those to the "env" of {name!r} in {path}'
        )
    if needed:
        return (
            f"it needs {', '.join(needed)} from your shell, which toolwise does not pass to servers: add "
            + ", ".join(f'"{v}": "…"' for v in needed)
            + f' to the "env" of {name!r} in {path}'
        )
    by_hand = shlex.join([spec.command, *mask_args(spec.args)])  # to paste as printed; never a secret whole
    return f'run `{by_hand}` by hand to see why, then fix its "args"/"env" in {path}'


MAX_PROBES = 40  # starts of a failing server doctor allows itself to find the variables it needs
EXIT_WAIT_S = 1.0  # how long a failed start's process is given to be reaped, for its exit status


async def needed_variables(spec: StdioServer, config: AppConfig) -> list[str]:
    """The variables of this shell, not passed by toolwise, without which the server does not start
    ([] when it does not start with all of them either). Each one is found by a binary search for the
    shortest prefix of the remaining candidates that, with those already found, starts it: its last
    variable is needed. That costs about log2(candidates) + 1 starts a variable, however many variables
    the shell has (CI shells have hundreds); past MAX_PROBES the undecided rest is returned with them."""
    given = downstream_environment(spec.env)
    candidates = sorted(k for k, v in os.environ.items() if given.get(k) != v and not v.startswith("()"))
    budget = config.toolwise.start_timeout_s
    began = asyncio.get_running_loop().time()
    if not candidates or not await _starts(spec, config, given, candidates, budget):
        return []
    # a probe that takes far longer than the start with everything is taken for one that hangs; the
    # floor is generous because a loaded machine (CI, several servers probed at once) starts slowly,
    # and a probe cut short reads as "needs more" and names a variable it does not need
    budget = min(budget, max(15.0, 5 * (asyncio.get_running_loop().time() - began)))
    needed: list[str] = []
    pool, probes = candidates, 0  # invariant: it starts with needed + pool
    while pool:
        if needed:
            probes += 1
            if await _starts(spec, config, given, needed, budget):
                break
        low, high = 1, len(pool)
        while low < high:
            if probes >= MAX_PROBES:
                return sorted(needed + pool)
            middle = (low + high) // 2
            probes += 1
            if await _starts(spec, config, given, needed + pool[:middle], budget):
                high = middle
            else:
                low = middle + 1
        needed.append(pool[high - 1])
        pool = pool[: high - 1]
    return sorted(needed)


async def _starts(spec: StdioServer, config: AppConfig, given: dict[str, str], extra: list[str], budget: float) -> bool:
    env = given | {k: os.environ[k] for k in extra}
    with tempfile.TemporaryFile("w+") as errlog:
        try:
            async with asyncio.timeout(budget):
                await start(stdio_parameters(spec, env), config, errlog)
        except Exception:  # noqa: BLE001 - a probe either starts or does not
            return False
    return True


async def _exit_status(spawned: list[Any]) -> int | None:
    """The exit status of the process a failed start spawned last: its pipes close as it exits, before its
    exit is reaped, so it is waited for a moment; None if it runs on (or none was spawned)."""
    if not spawned:
        return None
    try:
        return int(await asyncio.wait_for(spawned[-1].wait(), EXIT_WAIT_S))
    except TimeoutError:
        return None


def _describe(exc: BaseException) -> str:
    cause = _leaf(exc)
    return f"{type(cause).__name__}: {cause}"


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside the task groups the SDK wraps a failed start in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def check_database(config: AppConfig) -> Check:
    url = config.toolwise.database_url
    try:
        async with FeedbackService(url, integrity_check_after_s=None) as feedback:  # checked below, waited for
            count = await feedback.reads.count_executions(config.toolwise.namespace)
    except DatabaseUnusableError as exc:  # its message names the database and what to do
        return Check("database", False, str(exc), "fix database_url, or pass --database-url")
    except Exception as exc:  # noqa: BLE001 - any failure to open is what this check reports
        what = f"{shown_url(url)}: {type(exc).__name__}: {exc}"  # a URL that is none: DatabaseUnusableError
        return Check("database", False, what, "fix database_url (or the server)")
    detail = f"{shown_url(url)}: {count} executions in namespace {config.toolwise.namespace!r}"
    if (path := sqlite_path(url)) is None:
        return Check("database", True, detail)
    try:
        problems = await asyncio.to_thread(check_file, path, full=True)  # every page: as long as the file is big
    except sqlite3.Error as exc:
        return Check("database", False, f"{path}: the integrity check could not run: {exc}", "run doctor again")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        return Check("database", False, f"{path} is damaged: {'; '.join(problems[:3])}{more}", recovery(path))
    return Check("database", True, f"{detail}, integrity_check ok")


def check_pinned(config: AppConfig, path: Path, servers: list[Check]) -> list[Check]:
    """A `pinned_tools` name or glob that matches no tool toolwise would serve (a typo pins nothing);
    only once every server started, since a server that did not may hold it."""
    settings = config.toolwise
    if not settings.pinned_tools or not all(check.ok for check in servers):
        return []
    own = [*own_tools(admin=settings.admin_tools, snapshots=settings.snapshot_tools), SEARCH_TOOLS, CALL_TOOL]
    names = [*own, *(name for check in servers for name in check.tools)]
    unknown = matching_none(settings.pinned_tools, names)
    if not unknown:
        return []
    fix = correct(f"pinned_tools in {path}", unknown, names)
    return [Check("pinned_tools", False, f"{', '.join(unknown)} matches no tool toolwise serves", fix)]


async def diagnose(config: AppConfig, path: Path, database: bool = True) -> list[Check]:
    servers = await asyncio.gather(*(check_downstream(n, s, config, path) for n, s in config.enabled_servers.items()))
    checks = [*servers, *check_pinned(config, path, list(servers))]
    return [*checks, await check_database(config)] if database else checks


def report(path: Path, config: AppConfig, database: bool) -> int:
    """Check one config's servers (and its database, unless a config before it shares it) and print each
    check, secrets masked (a url's password, a token in an error: never whole); how many failed."""
    import typer

    from toolwise.cli.masked import literal_secrets, mask_text, unresolve
    from toolwise.config import referenced_values

    raw = json.loads(path.read_text(encoding="utf-8"))  # the servers as written: their ${VAR} references
    references = literal_secrets(raw["mcpServers"]) | referenced_values(raw["mcpServers"], os.environ)
    typer.echo(f"config: {path}")
    for name in sorted(set(config.servers) - set(config.enabled_servers)):
        typer.echo(f'off  server {name!r}: "disabled": true in {path}, not started')
    checks = asyncio.run(diagnose(config, path, database))
    for check in checks:
        typer.echo(mask_text(unresolve(f"{'ok  ' if check.ok else 'FAIL'} {check.what}: {check.detail}", references)))
        if check.fix:
            typer.echo(mask_text(unresolve(f"     fix: {check.fix}", references)))
    return sum(not c.ok for c in checks)
