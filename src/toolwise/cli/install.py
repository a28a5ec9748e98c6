"""`toolwise install`: put toolwise in front of the MCP servers a client (Claude Desktop, Claude Code,
Cursor) already starts, and `--undo` it.

The client's `mcpServers` move into a toolwise config in the user's config dir (one file per client,
so each client keeps exactly its own servers) and the client gets one entry that starts toolwise on
that file. Every other key of the client's file stays as it was. Before a write the file is copied
to a timestamped backup in toolwise's data dir (`installs.py`), and the write is recorded in
`installs.json` (next to the toolwise configs) so that `--undo` can put the file back even after
several installs.

A server's `env` and `headers` often hold secrets (tokens, API keys), so every file written here is
private: the toolwise configs, `installs.json` and the backups are created 0600; the client's own file
keeps its mode (a 0600 file stays 0600; `--undo` puts back the mode it had before the install), and a
symlinked client config is written through its link (the link stays).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shlex
import subprocess
import sys
from enum import StrEnum
from pathlib import Path, PureWindowsPath
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolwise.cli.installs import (
    PRIVATE,
    InstallError,
    backup,
    config_dir,
    file_mode,
    load_state,
    prune_backups,
    save_state,
    sha,
    state_path,
    write_private,
)
from toolwise.cli.scopes import USER_SCOPE, Plan, Scope, project_scopes, servers_of, with_servers
from toolwise.config import ConfigError, Downstream, describe, expand_variables
from toolwise.downstream.environment import network_variables

ENTRY = "toolwise"
TRANSPORTS = {None: "stdio", "stdio": "stdio", "http": "http", "streamable-http": "http", "streamableHttp": "http"}
_DOWNSTREAM: TypeAdapter[Any] = TypeAdapter(Downstream)


class Client(StrEnum):
    claude_desktop = "claude-desktop"
    claude_code = "claude-code"
    cursor = "cursor"


def installed_configs() -> list[Path]:
    """The toolwise configs `install` wrote, one per client config installed."""
    return sorted(p for p in config_dir().glob("*.json") if p.name != "installs.json")


def served_configs() -> dict[Path, Path]:
    """The toolwise configs a client config recorded in `installs.json` serves now (a toolwise entry in
    one of its scopes names the file), each with that client config. A config an `--undo` left behind is
    not among them."""
    served: dict[Path, Path] = {}
    for client_path in map(Path, load_state()):
        try:
            doc = json.loads(client_path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError):
            continue  # moved, unreadable or broken: it serves nothing toolwise can tell
        if not isinstance(doc, dict) or not isinstance(doc.get("mcpServers", {}), dict):
            continue
        for where in [USER_SCOPE, *project_scopes(doc)]:
            for entry in servers_of(doc, where).values():
                config = _served_config(entry) if is_toolwise(entry) else None
                if config is not None and config.exists():
                    served.setdefault(config, client_path)
    return served


def toolwise_config_path(client: Client, path: Path | None) -> Path:
    """The toolwise config of one client config: named for the client (and for the file, when --path
    names one, so a project's .mcp.json does not share the user scope's servers)."""
    if path is None:
        return config_dir() / f"{client.value}.json"
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]
    return config_dir() / f"{client.value}-{digest}.json"


def client_config_path(client: Client, platform: str | None = None, home: Path | None = None) -> Path:
    """Where the client keeps its MCP servers on this OS (Claude Code: the user scope of ~/.claude.json;
    a project's `.mcp.json` is passed with --path)."""
    home = home or Path.home()
    platform = platform or sys.platform
    if client is Client.claude_desktop:
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json"
        if platform == "win32":
            appdata = os.environ.get("APPDATA")
            return (
                (Path(appdata) if appdata else home / "AppData" / "Roaming") / "Claude" / "claude_desktop_config.json"
            )
        xdg = os.environ.get("XDG_CONFIG_HOME")
        return (Path(xdg) if xdg else home / ".config") / "Claude" / "claude_desktop_config.json"
    if client is Client.claude_code:
        return home / ".claude.json"
    return home / ".cursor" / "mcp.json"


def toolwise_command(platform: str | None = None) -> list[str]:
    """How a client starts this toolwise: the absolute path of its console script (`Scripts\\toolwise.exe`
    on Windows), or this interpreter with `-m toolwise` when no script is installed."""
    import sysconfig

    name = "toolwise.exe" if (platform or sys.platform) == "win32" else "toolwise"
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        if (folder / name).exists():
            return [str(folder / name)]
    return [sys.executable, "-m", "toolwise"]


def is_toolwise(entry: Any) -> bool:
    """An entry that starts toolwise (never wrapped inside toolwise again)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    name = PureWindowsPath(entry["command"]).name.lower()  # splits on both / and \
    args = entry.get("args") or []
    return (
        name in ("toolwise", "toolwise.exe") or "toolwise" in args or "toolwise.server" in args
    )  # the latter: before 2026-11-25


def translate(name: str, entry: Any) -> tuple[dict[str, Any] | None, str | None]:
    """The entry as a toolwise config holds it, or why it stays with the client."""
    if not isinstance(entry, dict):
        return None, "it is not an object"
    kind = entry.get("type")
    if kind not in TRANSPORTS:
        return None, f"toolwise proxies stdio and streamable HTTP, not transport {kind!r}"
    if "__" in name:
        return None, "its name contains '__', toolwise's separator between server and tool"
    spec = {k: v for k, v in entry.items() if k != "type"}
    try:  # as toolwise will load it: `${VAR}` expanded (kept as written in the file)
        expanded = expand_variables({name: spec}, os.environ)[name]
    except ConfigError:
        expanded = spec  # unset here: toolwise names it when it loads the config, if still unset then
    try:
        _DOWNSTREAM.validate_python(expanded)
    except ValidationError as exc:
        return None, describe(exc)
    return spec, None


def parse(path: Path, text: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
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


def dump(doc: dict[str, Any], like: str | None = None) -> str:
    """JSON in the indentation of the file it replaces (2 spaces for a new one)."""
    indent: int | str = 2
    for line in (like or "").splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            indent = "\t" if lead.startswith("\t") else len(lead)
            break
    return json.dumps(doc, indent=indent, ensure_ascii=False) + "\n"


SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin")  # where a desktop app's bare PATH looks


def search_path(servers: dict[str, Any]) -> tuple[str, list[str]]:
    """PATH for toolwise's entry: the folders of the servers' commands as found now (GUI apps such as
    Claude Desktop on macOS start with a bare PATH, where npx/uvx are missing; `node` sits beside `npx`),
    then the system's folders; also the commands found nowhere. Not the whole shell PATH: an entry that
    pinned it would go stale when the shell's changes, and toolwise itself is started by absolute path."""
    from toolwise.downstream.connection import resolve_command  # the MCP client: not for every CLI command

    folders: list[str] = []
    missing: list[str] = []
    for name, spec in servers.items():
        command = spec.get("command")
        if command is None:
            continue
        found = resolve_command(command)
        if found == command and not Path(command).is_absolute():
            missing.append(f"{command} (server {name!r})")
        else:
            folders.append(str(Path(found).parent))
    system = [] if sys.platform == "win32" else list(SYSTEM_PATH)
    return os.pathsep.join(dict.fromkeys(f for f in [*folders, *system] if f)), missing


def read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # Notepad saves a BOM
    except FileNotFoundError:
        raise InstallError(
            f"no config at {path}: is the client installed, and has it any MCP server yet? "
            "(pass --path for a config elsewhere, e.g. a project's .mcp.json)"
        ) from None


def plan_install(client: Client, client_path: Path, toolwise_path: Path, projects: bool = False) -> Plan:
    """Move the client's servers into the toolwise config and leave one toolwise entry in their place;
    with `projects`, also each of Claude Code's project scopes into a toolwise config of its own."""
    before = read(client_path)
    doc = parse(client_path, before)
    plan, new_doc = Plan(client_path, before, before), doc
    for where in [USER_SCOPE, *(project_scopes(doc) if projects else [])]:
        target = toolwise_path if where == USER_SCOPE else toolwise_config_path(client, Path(where))
        scope, servers = _plan_scope(client, client_path, Scope(where, target), servers_of(doc, where))
        plan.scopes.append(scope)  # one that serves nothing still says which servers stay and why
        if servers is not None:
            new_doc = with_servers(new_doc, where, servers)
    if not any(scope.serves for scope in plan.scopes):
        raise InstallError(f"{client_path} has no MCP server toolwise can serve; nothing to install.")
    if new_doc != doc:
        plan.client_after = dump(new_doc, before)
    return plan


def _plan_scope(
    client: Client, client_path: Path, scope: Scope, servers: dict[str, Any]
) -> tuple[Scope, dict[str, Any] | None]:
    """One scope's servers into its toolwise config: the scope and its new `mcpServers` (None when it
    has nothing toolwise can serve)."""
    ours = [name for name, entry in servers.items() if is_toolwise(entry)]
    # A toolwise entry set up by hand keeps serving its own config: the servers are added to that file.
    scope.toolwise_path = next((p for name in ours if (p := _served_config(servers[name]))), scope.toolwise_path)
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
        if name in downstream and downstream[name] != spec and not ours:
            scope.replaced.append(name)  # the file is left from an --undo: the client's entry is the truth
        elif name in downstream and downstream[name] != spec:
            raise InstallError(
                f"server {name!r} is in {client_path}{scope.of} and, differently, in {toolwise_path}; rename one "
                "of them (or remove the stale one from the toolwise config) and run again. Nothing was changed."
            )
        downstream[name] = spec
        scope.moved[name] = entry
    if not downstream:
        return scope, None
    path_env, scope.missing = search_path(downstream)
    entry_name = ours[0] if ours else _free_name(servers)
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
    scope.toolwise_after = scope.toolwise_before if unchanged else dump(new_toolwise, scope.toolwise_before)
    _check_nothing_lost(servers, new_servers, downstream, ours)
    return scope, new_servers


def _served_config(entry: dict[str, Any]) -> Path | None:
    """The config a toolwise entry serves (`--config X` / `-c X` in its args), if it names one."""
    args = [str(a) for a in entry.get("args") or []]
    for flag in ("--config", "-c"):
        if flag in args[:-1]:
            return Path(args[args.index(flag) + 1])
    return None


def _free_name(servers: dict[str, Any]) -> str:
    name, n = ENTRY, 1
    while name in servers:
        n += 1
        name = f"{ENTRY}-{n}"
    return name


def _check_nothing_lost(
    before: dict[str, Any], client: dict[str, Any], toolwise: dict[str, Any], ours: list[str]
) -> None:
    lost = [name for name in before if name not in ours and name not in client and name not in toolwise]
    if lost:
        raise InstallError(f"internal error: servers {lost} would be lost; nothing was changed")


def apply(plan: Plan, record: bool = True, mode: int | None = None) -> Path | None:
    """Write what the plan says (backup first); returns the backup, None when nothing changed. The
    client's file keeps its mode (or gets `mode`); the toolwise config is private."""
    if not plan.changed:
        return None
    folder = (plan.client_path.resolve() if plan.client_path.is_symlink() else plan.client_path).parent
    if not os.access(folder, os.W_OK):  # found before the backup and the toolwise config are written
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(plan.client_path))
    before_mode = file_mode(plan.client_path)
    saved = backup(plan.client_path, plan.client_before)
    for scope in plan.scopes:
        if scope.writes and scope.toolwise_after is not None:
            write_private(scope.toolwise_path, scope.toolwise_after)
    if plan.client_after != plan.client_before:
        write_private(plan.client_path, plan.client_after, mode if mode is not None else before_mode or PRIVATE)
    if record and plan.client_after != plan.client_before:
        state = load_state()
        state.setdefault(str(plan.client_path), []).append(
            {
                "backup": str(saved),
                "written_sha256": sha(plan.client_after),
                "moved": {
                    name: e for scope in plan.scopes if scope.where == USER_SCOPE for name, e in scope.moved.items()
                },
                "projects": {s.where: s.moved for s in plan.scopes if s.where != USER_SCOPE and s.moved},
                "mode": before_mode,
            }
        )
        save_state(state)
        prune_backups(plan.client_path)
    return saved


def plan_undo(client_path: Path) -> tuple[Plan, int]:
    """Put the client's config back: the backups of installs the file still shows unchanged are restored
    verbatim; if it was edited since, each scope's toolwise entry is replaced by the servers moved out of
    it (the edits are kept). Returns the plan and how many install records it consumes."""
    history = load_state().get(str(client_path), [])
    if not history:
        raise InstallError(f"no install of toolwise into {client_path} is recorded in {state_path()}")
    current = read(client_path)
    text, used = current, 0
    for record in reversed(history):
        if sha(text) != record["written_sha256"]:
            break
        text = Path(record["backup"]).read_text(encoding="utf-8-sig")
        used += 1
    doc = parse(client_path, text)
    if used < len(history):
        pending, restored_doc = history[: len(history) - used], doc
        for where in [USER_SCOPE, *project_scopes(doc)]:
            servers = servers_of(doc, where)
            if not any(is_toolwise(e) for e in servers.values()):
                continue
            restored = {n: e for n, e in servers.items() if not is_toolwise(e)}
            for record in pending:
                moved = record["moved"] if where == USER_SCOPE else record.get("projects", {}).get(where, {})
                for name, entry in moved.items():
                    restored.setdefault(name, entry)
            restored_doc = with_servers(restored_doc, where, restored)
        if restored_doc != doc:
            text, used = dump(restored_doc, text), len(history)
    return Plan(client_path, current, text), used


def undo(plan: Plan, used: int) -> Path | None:
    """Write the undo plan with the mode the file had before the first install it undoes (installs
    recorded before modes were: the file keeps its mode), and drop the records it consumed."""
    state = load_state()
    history = state.get(str(plan.client_path), [])
    mode = history[-used].get("mode") if used else None
    saved = apply(plan, record=False, mode=mode)
    records = history[: -used or None]
    if records:
        state[str(plan.client_path)] = records
    else:
        state.pop(str(plan.client_path), None)
    save_state(state)
    prune_backups(plan.client_path)
    return saved


# -- the command ------------------------------------------------------------------------------------


def what_file(client: Client, path: Path | None) -> str:
    """What the file `install` changes is, in its output: the client's own config, or a project's
    `.mcp.json` (Claude Code's project scope), or just a config when --path names another file."""
    if path is None:
        return f"{client.value} config"
    return "project config (.mcp.json)" if path.name == ".mcp.json" else "MCP config"


def tracked_by_git(path: Path) -> bool:
    """Whether `path` is a file a git repository tracks (a project's `.mcp.json` often is: shared with
    the team); False where git is not installed."""
    try:
        found = subprocess.run(
            ["git", "ls-files", "--error-unmatch", "--", path.name], cwd=path.parent, capture_output=True, check=False
        )
    except FileNotFoundError:  # no git: nothing tracks it that toolwise could tell
        return False
    return found.returncode == 0


def undo_command(client: Client, path: Path | None) -> str:
    """The `--undo` of this install as a shell command that works as printed: toolwise's absolute
    path (it need not be on the shell's PATH) and the file's, quoted."""
    where = ["--path", str(path)] if path is not None else []
    return shlex.join([*toolwise_command(), "install", "--client", client.value, *where, "--undo"])


def client_of(path: Path | None) -> Client:
    """The client a config file belongs to when --client is not given: a project's `.mcp.json` is Claude
    Code's, a `.cursor` folder's `mcp.json` Cursor's; otherwise (and without --path) Claude Desktop."""
    if path is not None and path.name == ".mcp.json":
        return Client.claude_code
    if path is not None and path.name == "mcp.json" and path.absolute().parent.name == ".cursor":
        return Client.cursor
    return Client.claude_desktop


def run(client: Client | None, path: Path | None, dry_run: bool, undo_it: bool) -> Plan:
    """`toolwise install`: print what changes (a unified diff), write it unless a dry run. Claude Code's
    ~/.claude.json: its user scope and every project scope with servers of its own. Without `client`, the
    one the file belongs to (`client_of`)."""
    client = client or client_of(path)
    path = path.absolute() if path is not None else None  # recorded by it: --undo may run from elsewhere
    client_path = path or client_config_path(client)
    if undo_it:
        plan, used = plan_undo(client_path)
    else:
        projects = client is Client.claude_code and path is None
        plan, used = plan_install(client, client_path, toolwise_config_path(client, path), projects), 0
    echo, owner = _echo, client.value if path is None else "the client"
    echo(f"{what_file(client, path)}: {client_path}")
    if path is not None and not undo_it and tracked_by_git(client_path):
        echo(
            f"warning: {client_path.name} is tracked by git: committed, its toolwise entry (this machine's paths) "
            "would reach everyone who pulls it; keep the change out of your commits"
        )
    for scope in plan.scopes:
        _say_scope(scope, owner)
    if not plan.changed:
        echo("nothing to change: " + ("toolwise is already installed" if not undo_it else "already undone"))
        return plan
    echo(plan.diff().rstrip("\n"))
    if dry_run:
        echo("dry run: nothing was written")
        return plan
    try:
        saved = undo(plan, used) if undo_it else apply(plan)
    except OSError as exc:  # a read-only folder, a full disk
        folder = Path(exc.filename).parent if exc.filename else client_path.parent
        raise InstallError(
            f"cannot write in {folder}: {exc.strerror}; make that folder writable and run again"
        ) from exc
    echo(f"backup of the previous {client_path.name}: {saved}")
    if undo_it:
        echo(f"restored {client_path}; the toolwise configs and the recorded data are left in place")
    else:
        configs = " and ".join(str(scope.toolwise_path) for scope in plan.scopes if scope.serves)
        echo(
            f"wrote {client_path} and {configs}. Restart {owner}; `toolwise doctor` checks every "
            f"server starts; this puts the old config back:\n  {undo_command(client, path)}"
        )
    return plan


def _say_scope(scope: Scope, owner: str) -> None:
    """What `install` does with one scope's servers: moved, updated, kept with the client, not found."""
    if scope.moved:
        _echo(f"moves {len(scope.moved)} server(s){scope.of} into {scope.toolwise_path}: {', '.join(scope.moved)}")
    if scope.replaced:
        names = ", ".join(scope.replaced)
        _echo(f"updates {names} in {scope.toolwise_path} (left by an earlier --undo) to the client's entries")
    for name, why in scope.kept.items():
        _echo(f"stays with {owner}{scope.of}: {name!r} ({why})")
    for what in scope.missing:
        _echo(f"warning: command not found on PATH: {what}; install it, or toolwise will report it as failed")


def _echo(text: str) -> None:
    import typer

    typer.echo(text)
