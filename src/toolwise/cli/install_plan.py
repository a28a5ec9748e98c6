"""What `toolwise install` and `--undo` would write, as a `Plan`: the client's file read and parsed, each
of its servers translated into a toolwise config's entry (or kept, with why), one toolwise entry in their
place; or, for `--undo`, the file as it was before."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolwise.cli.clients import Client, is_toolwise, served_config, toolwise_command, toolwise_config_path
from toolwise.cli.installs import InstallError, exact_text, load_state, recorded_as, state_path, written
from toolwise.cli.json_text import BOM, Written, dumped, written_values
from toolwise.cli.scopes import USER_SCOPE, Plan, Scope, project_scopes, servers_of, with_servers
from toolwise.config import Downstream, describe, expand_variables
from toolwise.downstream.environment import command_found, network_variables, provider_of, resolve_command

ENTRY = "toolwise"
# Claude Code runs one server of a name, local scope over project over user: entries named alike would hide
# the user scope's toolwise (and its servers) in every project that has servers of its own.
LOCAL_ENTRY, PROJECT_ENTRY = f"{ENTRY}-local", f"{ENTRY}-project"
TRANSPORTS = {None: "stdio", "stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}
_DOWNSTREAM: TypeAdapter[Any] = TypeAdapter(Downstream)


def translate(name: str, entry: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The entry as a toolwise config holds it (as the client has it: its keys, `type` included, nothing
    added), or why it stays with the client."""
    if not isinstance(entry, dict):
        return None, "it is not an object"
    kind = entry.get("type")
    if kind not in TRANSPORTS:
        return None, f"toolwise proxies stdio and streamable HTTP, not transport {kind!r}"
    if "__" in name:
        return None, "its name contains '__', toolwise's separator between server and tool"
    spec = dict(entry)
    # as toolwise will load it: `${VAR}` expanded (kept as written in the file); one unset here is left as it is:
    # toolwise names it when it loads the config, if still unset then
    expanded = expand_variables({name: spec}, os.environ, unset_kept=True)[name]
    try:
        _DOWNSTREAM.validate_python(expanded)
    except ValidationError as exc:
        return None, describe(exc)
    return spec, None


def parse(path: Path, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text.removeprefix(BOM))
    except json.JSONDecodeError as exc:
        raise InstallError(
            f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg}); "
            "fix that line and run again. Nothing was changed."
        ) from exc
    if not isinstance(doc, dict):
        raise InstallError(f"{path}: the top level must be an object. Nothing was changed.")
    if not isinstance(doc.get("mcpServers", {}), dict):
        raise InstallError(f"{path}: 'mcpServers' must be an object. Nothing was changed.")
    return doc


SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")  # where a desktop app's bare PATH looks


def search_path(servers: dict[str, Any]) -> tuple[str, list[str]]:
    """PATH for toolwise's entry: the folders of the servers' commands as found now (GUI apps such as
    Claude Desktop on macOS start with a bare PATH, where npx/uvx are missing; `node` sits beside `npx`),
    then the system's folders; also the commands found nowhere. Not the whole shell PATH: an entry that
    pinned it would go stale when the shell's changes, and toolwise itself is started by absolute path."""
    folders: list[str] = []
    missing: list[str] = []
    for name, spec in servers.items():
        command = spec.get("command")
        if command is None:
            continue
        found = resolve_command(command)
        if found != command or Path(command).is_absolute():
            folders.append(str(Path(found).parent))
        elif not command_found(command, spec.get("cwd")):  # a relative path in its own folder: started from there
            provider = provider_of(command)
            missing.append(f"{command} (server {name!r}{f'; it comes with {provider}' if provider else ''})")
    system = [] if sys.platform == "win32" else list(SYSTEM_PATH)
    return os.pathsep.join(dict.fromkeys(f for f in [*folders, *system] if f)), missing


def read(path: Path, named: bool = False) -> str:
    """The client config's text; `named`: --path named it (a missing file is then a wrong path)."""
    try:
        return exact_text(path)
    except FileNotFoundError:
        if named:
            raise InstallError(f"no config at {path}: check the file --path names") from None
        raise InstallError(
            f"no config at {path}: is the client installed, and has it any MCP server yet? "
            "(pass --path for a config elsewhere, e.g. a project's .mcp.json)"
        ) from None
    except OSError as exc:  # unreadable: its permissions, or not a file
        raise InstallError(f"cannot read {path}: {exc.strerror or exc}") from None


def plan_install(
    client: Client,
    client_path: Path,
    toolwise_path: Path,
    projects: bool = False,
    entry: str = ENTRY,
    named: bool = False,
) -> Plan:
    """Move the client's servers into the toolwise config and leave one toolwise entry, named `entry`, in
    their place; with `projects`, also each of Claude Code's project scopes into a toolwise config of its
    own (its entry: LOCAL_ENTRY); `named`: --path named the client's file."""
    before = read(client_path, named)
    doc = parse(client_path, before)
    plan, new_doc = Plan(client_path, before, before), doc
    scopes = [USER_SCOPE, *(project_scopes(doc) if projects else [])]
    written = written_values(before, [_servers_path(where) for where in scopes])  # moved as the client has them
    mcp_json = client is Client.claude_code and client_path.name == ".mcp.json"  # a project's, at its root
    for where in scopes:
        target = toolwise_path if where == USER_SCOPE else toolwise_config_path(client, Path(where))
        name = entry if where == USER_SCOPE else LOCAL_ENTRY
        folder = where if where != USER_SCOPE else str(client_path.resolve().parent) if mcp_json else None
        scope = Scope(where, target)
        scope, servers = _plan_scope(client, client_path, scope, servers_of(doc, where), name, written, folder)
        plan.scopes.append(scope)  # one that serves nothing still says which servers stay and why
        if servers is not None:
            new_doc = with_servers(new_doc, where, servers)
    if not any(scope.serves for scope in plan.scopes):
        raise InstallError(f"{client_path} has no MCP server toolwise can serve; nothing to install.")
    if new_doc != doc:
        plan.client_after = dumped(new_doc, before)
    return plan


def _servers_path(where: str) -> tuple[str, ...]:
    """Where a scope's `mcpServers` is in the client's file (`servers_of`)."""
    return ("mcpServers",) if where == USER_SCOPE else ("projects", where, "mcpServers")


def _plan_scope(
    client: Client,
    client_path: Path,
    scope: Scope,
    servers: dict[str, Any],
    named: str,
    written: dict[str, Written],
    folder: str | None = None,
) -> tuple[Scope, dict[str, Any] | None]:
    """One scope's servers into its toolwise config, each written there as `written` has it (the client's
    text): the scope and its new `mcpServers` (None when it has nothing toolwise can serve). An entry of an
    earlier install named ENTRY where `named` is another name takes that name (it hid the user scope's).
    `folder`: a project's, where Claude Code starts its servers (`started_in`)."""
    ours = [name for name, entry in servers.items() if is_toolwise(entry)]
    # A toolwise entry set up by hand keeps serving its own config: the servers are added to that file.
    scope.toolwise_path = next((p for name in ours if (p := served_config(servers[name]))), scope.toolwise_path)
    toolwise_path = scope.toolwise_path
    scope.toolwise_before = toolwise_path.read_text(encoding="utf-8") if toolwise_path.exists() else None
    toolwise_doc = parse(toolwise_path, scope.toolwise_before) if scope.toolwise_before is not None else {}
    downstream: dict[str, Any] = dict(toolwise_doc.get("mcpServers", {}))
    for name, entry in servers.items():
        if name in ours:
            continue
        spec, why = translate(name, entry)
        if spec is None:
            scope.kept[name] = why or "?"
            continue
        scope.moved[name] = entry
        spec = started_in(spec, folder)
        if name in downstream and (_same_server(downstream[name], spec) or _same_server(downstream[name], entry)):
            continue  # as toolwise has it (one an earlier install moved without its `type`, or its `cwd`)
        if name in downstream and not ours:
            scope.replaced.append(name)  # the file is left from an --undo: the client's entry is the truth
        elif name in downstream:
            raise InstallError(
                f"server {name!r} is in {client_path}{scope.of} and, differently, in {toolwise_path}; rename one "
                "of them (or remove the stale one from the toolwise config) and run again. Nothing was changed."
            )
        downstream[name] = spec
    if not downstream:
        return scope, None
    if not ours:  # a toolwise config left by an --undo: what it still serves, the client no longer names
        scope.left = [name for name in downstream if name not in servers]
    path_env, scope.missing = search_path(downstream)
    entry_name = ours[0] if ours and not (ours[0] == ENTRY != named) else _free_name(servers, named)
    previous = servers.get(entry_name, {}) if ours else {}
    own: dict[str, Any] = {"type": "stdio"} if client is Client.claude_code else {}
    command = toolwise_command()
    own |= {
        **{k: v for k, v in previous.items() if k not in ("command", "args", "env")},
        "command": command[0],
        "args": [*command[1:], "serve", "--config", str(toolwise_path)],
        "env": {**previous.get("env", {}), **network_variables(), "PATH": path_env},
    }
    new_servers = {entry_name: own, **{name: servers[name] for name in scope.kept}}
    new_toolwise = {**toolwise_doc, "mcpServers": downstream}
    unchanged = new_toolwise == toolwise_doc
    scope.toolwise_after = scope.toolwise_before if unchanged else dumped(new_toolwise, scope.toolwise_before, written)
    _check_nothing_lost(servers, new_servers, downstream, ours)
    return scope, new_servers


def started_in(spec: dict[str, Any], folder: str | None) -> dict[str, Any]:
    """A project's stdio server with the project's `folder` as its `cwd`, where Claude Code starts it, unless it
    names one: a relative path in its command or arguments (`--repository .`, `./node_modules/.bin/x`) then
    means the same wherever toolwise, or `toolwise doctor`, runs."""
    if folder is None or "command" not in spec or "cwd" in spec:
        return spec
    return {**spec, "cwd": folder}


def _same_server(toolwise: Any, client: dict[str, Any]) -> bool:
    """Whether a toolwise config's entry serves the client's: the same keys and values but `type`, which
    names nothing the other keys do not (a `url`: streamable HTTP; a `command`: stdio), and which installs
    before this one did not move."""
    return isinstance(toolwise, dict) and {k: v for k, v in toolwise.items() if k != "type"} == {
        k: v for k, v in client.items() if k != "type"
    }


def _free_name(servers: dict[str, Any], named: str) -> str:
    name, n = named, 1
    while name in servers:
        n += 1
        name = f"{named}-{n}"
    return name


def _check_nothing_lost(
    before: dict[str, Any], client: dict[str, Any], toolwise: dict[str, Any], ours: list[str]
) -> None:
    lost = [name for name in before if name not in ours and name not in client and name not in toolwise]
    if lost:
        raise InstallError(f"internal error: servers {lost} would be lost; nothing was changed")


def plan_undo(client_path: Path) -> tuple[Plan, int]:
    """Put the client's config back: the backups of installs the file still shows unchanged are restored
    verbatim; if it was edited since (or a backup is gone), each scope's toolwise entry is replaced by the
    servers moved out of it (the edits are kept). Returns the plan and how many install records it consumes."""
    state = load_state()
    history = state.get(recorded_as(state, client_path), [])
    if not history:
        raise InstallError(f"no install of toolwise into {client_path} is recorded in {state_path()}")
    current = read(client_path)
    text, used = current, 0
    for record in reversed(history):
        if not written(text, record):
            break
        try:
            text = exact_text(Path(record["backup"]))
        except FileNotFoundError:  # the data dir cleaned: put the servers back from the record, as after an edit
            break
        used += 1
    doc = parse(client_path, text)
    if used < len(history):
        pending, restored_doc = history[: len(history) - used], doc
        as_written: dict[str, Written] = {}
        warnings: list[str] = []
        for where in [USER_SCOPE, *project_scopes(doc)]:
            servers = servers_of(doc, where)
            if not any(is_toolwise(e) for e in servers.values()):
                continue
            as_written |= _written_in([e for e in servers.values() if is_toolwise(e)], client_path, warnings)
            restored = {n: e for n, e in servers.items() if not is_toolwise(e)}
            for record in pending:
                moved = record["moved"] if where == USER_SCOPE else record.get("projects", {}).get(where, {})
                for name, entry in moved.items():
                    restored.setdefault(name, entry)
            restored_doc = with_servers(restored_doc, where, restored)
        if restored_doc != doc:
            text, used = dumped(restored_doc, text, as_written), len(history)
            return Plan(client_path, current, text, warnings=warnings), used
    return Plan(client_path, current, text), used


def _written_in(entries: list[dict[str, Any]], client_path: Path, warnings: list[str]) -> dict[str, Written]:
    """The servers of the toolwise configs these toolwise entries serve, as those files have them: a server
    put back into the client's file goes back as it was written there (as the client had it). A config that
    cannot be read costs only that layout (the servers come from the install's record): the undo goes on,
    and `warnings` names the file and what was wrong with it."""
    written: dict[str, Written] = {}
    for entry in entries:
        path = served_config(entry)
        if path is None:
            continue
        try:
            text = exact_text(path)
            doc = json.loads(text.removeprefix(BOM))
        except FileNotFoundError:
            why = "it is gone"
        except OSError as exc:
            why = f"cannot read it ({exc.strerror or exc})"
        except UnicodeDecodeError as exc:
            why = f"not UTF-8 text ({exc.reason} at byte {exc.start})"
        except json.JSONDecodeError as exc:
            why = f"not valid JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})"
        else:
            if isinstance(doc, dict) and isinstance(doc.get("mcpServers", {}), dict):
                written |= written_values(text, [("mcpServers",)])
                continue
            why = "'mcpServers' is not an object" if isinstance(doc, dict) else "the top level is not an object"
        warnings.append(f"{path}: {why}; its servers go back in the layout of {client_path.name}")
    return written
