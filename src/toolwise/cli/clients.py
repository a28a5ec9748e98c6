"""The MCP clients `toolwise install` serves (Claude Desktop, Claude Code, Cursor): where each keeps its
config, the toolwise config that serves it, how it starts toolwise, and which of its entries are toolwise's."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from enum import StrEnum
from pathlib import Path, PureWindowsPath
from typing import Any

from toolwise.cli.installs import config_dir, load_state
from toolwise.cli.scopes import USER_SCOPE, project_scopes, servers_of


class Client(StrEnum):
    claude_desktop = "claude-desktop"
    claude_code = "claude-code"
    cursor = "cursor"

    @property
    def app_name(self) -> str:
        """The app's own name, as a user sees it (the value is what --client takes)."""
        return {"claude-desktop": "Claude Desktop", "claude-code": "Claude Code", "cursor": "Cursor"}[self.value]


def installed_configs() -> list[Path]:
    """The toolwise configs `install` wrote, one per client config installed."""
    return sorted(p for p in config_dir().glob("*.json") if p.name != "installs.json")


def served_configs() -> dict[Path, str]:
    """The toolwise configs a client config recorded in `installs.json` serves now (a toolwise entry in
    one of its scopes names the file), each with whom it serves: that client config, or a project of it
    (`project /src/app in ~/.claude.json`). A config an `--undo` left behind is not among them."""
    served: dict[Path, str] = {}
    for client_path in map(Path, load_state()):
        try:
            doc = json.loads(client_path.read_text(encoding="utf-8-sig"))
        except (OSError, ValueError):
            continue  # moved, unreadable or broken: it serves nothing toolwise can tell
        if not isinstance(doc, dict) or not isinstance(doc.get("mcpServers", {}), dict):
            continue
        for where in [USER_SCOPE, *project_scopes(doc)]:
            for entry in servers_of(doc, where).values():
                config = served_config(entry) if is_toolwise(entry) else None
                if config is not None and config.exists():
                    served.setdefault(config, f"project {where} in {client_path}" if where else str(client_path))
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


def clone_of(command: str) -> Path | None:
    """The git checkout whose `.venv` holds `command`, if any: an entry starting it breaks when the clone
    moves or goes."""
    venv = next((folder for folder in Path(command).parents if folder.name == ".venv"), None)
    return venv.parent if venv is not None and (venv.parent / ".git").exists() else None  # .git: a file in a worktree


def is_toolwise(entry: Any) -> bool:
    """An entry that starts toolwise (never wrapped inside toolwise again)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    name = PureWindowsPath(entry["command"]).name.lower()  # splits on both / and \
    args = entry.get("args") or []
    return (
        name in ("toolwise", "toolwise.exe") or "toolwise" in args or "toolwise.server" in args
    )  # the latter: before 2026-11-25


def served_config(entry: dict[str, Any]) -> Path | None:
    """The config a toolwise entry serves (`--config X` / `-c X` in its args), if it names one."""
    args = [str(a) for a in entry.get("args") or []]
    for flag in ("--config", "-c"):
        if flag in args[:-1]:
            return Path(args[args.index(flag) + 1])
    return None


def client_of(path: Path | None) -> Client:
    """The client a config file belongs to when --client is not given: a project's `.mcp.json` is Claude
    Code's, a `.cursor` folder's `mcp.json` Cursor's; otherwise (and without --path) Claude Desktop."""
    if path is not None and path.name == ".mcp.json":
        return Client.claude_code
    if path is not None and path.name == "mcp.json" and path.absolute().parent.name == ".cursor":
        return Client.cursor
    return Client.claude_desktop
