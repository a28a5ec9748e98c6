"""`toolwise install`: put toolwise in front of the MCP servers a client (Claude Desktop, Claude Code,
Cursor) already starts, and `--undo` it.

The client's `mcpServers` move into a toolwise config in the user's config dir (one file per client,
so each client keeps exactly its own servers) and the client gets one entry that starts toolwise on
that file. Every other key of the client's file stays as it was. Before a write the file is copied
to a timestamped backup in toolwise's data dir (`installs.py`), and the write is recorded in
`installs.json` (next to the toolwise configs) so that `--undo` can put the file back even after
several installs. Installs and undos run one at a time (a lock beside `installs.json`).

A server's `env` and `headers` often hold secrets (tokens, API keys), so every file written here is
private: the toolwise configs, `installs.json` and the backups are created 0600; the client's own file
keeps its mode (a 0600 file stays 0600; `--undo` puts back the mode it had before the install), and a
symlinked client config is written through its link (the link stays).
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from toolwise.cli.clients import (
    Client,
    client_config_path,
    client_of,
    clone_of,
    toolwise_command,
    toolwise_config_path,
)
from toolwise.cli.install_plan import ENTRY, PROJECT_ENTRY, plan_install, plan_undo
from toolwise.cli.installs import InstallError, apply, one_at_a_time, undo
from toolwise.cli.scopes import Plan, Scope


def what_file(client: Client, path: Path | None) -> str:
    """What the file `install` changes is, in its output: the client's own config, or a project's
    `.mcp.json` (Claude Code's project scope), or just a config when --path names another file."""
    if path is None:
        return f"{client.app_name} config"
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


def run(client: Client | None, path: Path | None, dry_run: bool, undo_it: bool) -> Plan:
    """`toolwise install`: print what changes (a unified diff), write it unless a dry run. Claude Code's
    ~/.claude.json: its user scope and every project scope with servers of its own. Without `client`, the
    one the file belongs to (`client_of`)."""
    client = client or client_of(path)
    path = path.absolute() if path is not None else None  # recorded by it: --undo may run from elsewhere
    if path is not None and path.is_dir():  # the project's folder, for its .mcp.json
        raise InstallError(f"{path} is a folder: name the config file in it, e.g. --path {path / '.mcp.json'}")
    client_path = path or client_config_path(client)
    plan, used = _plan(client, path, client_path, undo_it)  # what it refuses, refused before the lock is made
    if dry_run or not plan.changed:
        return _run(client, path, client_path, dry_run, undo_it, plan, used)
    with one_at_a_time():  # planned again, from reading the files to recording the write: another install waits
        return _run(client, path, client_path, dry_run, undo_it, *_plan(client, path, client_path, undo_it))


def _plan(client: Client, path: Path | None, client_path: Path, undo_it: bool) -> tuple[Plan, int]:
    if undo_it:
        return plan_undo(client_path)
    projects = client is Client.claude_code and path is None
    entry = PROJECT_ENTRY if client is Client.claude_code and client_path.name == ".mcp.json" else ENTRY
    return plan_install(client, client_path, toolwise_config_path(client, path), projects, entry, path is not None), 0


def _run(
    client: Client, path: Path | None, client_path: Path, dry_run: bool, undo_it: bool, plan: Plan, used: int
) -> Plan:
    echo, owner = _echo, client.app_name if path is None else "the client"
    echo(f"{what_file(client, path)}: {client_path}")
    if path is not None and not undo_it and tracked_by_git(client_path):
        echo(
            f"warning: {client_path.name} is tracked by git: committed, its toolwise entry (this machine's paths) "
            "would reach everyone who pulls it; keep the change out of your commits"
        )
    for scope in plan.scopes:
        _say_scope(scope, owner)
    for warning in plan.warnings:
        echo(f"warning: {warning}")
    if not plan.changed:
        echo("nothing to change: " + ("toolwise is already installed" if not undo_it else "already undone"))
        return plan
    echo(plan.diff().rstrip("\n"))
    if not undo_it and (clone := clone_of(toolwise_command()[0])) is not None:
        echo(
            f"note: the client entry starts toolwise from the .venv of the clone {clone}, and breaks if the clone "
            "moves; `pipx install .` (or `uv tool install .`) in the clone, then `toolwise install` again from that "
            "install, gives an entry that outlives the clone"
        )
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
        written = " and ".join([str(client_path), *(str(scope.toolwise_path) for scope in plan.scopes if scope.writes)])
        echo(
            f"wrote {written}. Restart {owner}; `toolwise doctor` checks every "
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
    if scope.left:
        them = "it" if len(scope.left) == 1 else "them"
        names = ", ".join(map(repr, scope.left))
        _echo(f"also serves {names}, left in {scope.toolwise_path} by an earlier install (remove {them} there to stop)")
    for name, why in scope.kept.items():
        _echo(f"stays with {owner}{scope.of}: {name!r} ({why})")
    for what in scope.missing:
        _echo(f"warning: command not found on PATH: {what}; install it, or toolwise will report it as failed")


def _echo(text: str) -> None:
    import typer

    typer.echo(text)
