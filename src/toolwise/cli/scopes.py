"""Where a client config keeps its servers (scopes: the file's own `mcpServers`, and Claude Code's
project scopes in ~/.claude.json) and what `install` plans to write for them, as a printable diff."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwise.cli.masked import mask_text

USER_SCOPE = ""  # a client file's own `mcpServers` (Claude Code: the user scope); else a project's path


def project_scopes(doc: dict[str, Any]) -> list[str]:
    """The projects of Claude Code's ~/.claude.json with servers of their own (`projects[<path>].mcpServers`,
    where `claude mcp add` puts a server by default)."""
    projects = doc.get("projects")
    if not isinstance(projects, dict):
        return []
    return [
        where
        for where, project in projects.items()
        if isinstance(project, dict) and isinstance(project.get("mcpServers"), dict) and project["mcpServers"]
    ]


def servers_of(doc: dict[str, Any], where: str) -> dict[str, Any]:
    servers = doc.get("mcpServers", {}) if where == USER_SCOPE else doc["projects"][where]["mcpServers"]
    return dict(servers)


def with_servers(doc: dict[str, Any], where: str, servers: dict[str, Any]) -> dict[str, Any]:
    """`doc` with the `mcpServers` of one scope replaced (the rest of the document unchanged)."""
    if where == USER_SCOPE:
        return {**doc, "mcpServers": servers}
    projects = dict(doc["projects"])
    projects[where] = {**projects[where], "mcpServers": servers}
    return {**doc, "projects": projects}


@dataclass
class Scope:
    """One `mcpServers` object of a client config and the toolwise config its servers move into."""

    where: str  # USER_SCOPE, or the project's path
    toolwise_path: Path
    toolwise_before: str | None = None
    toolwise_after: str | None = None
    moved: dict[str, Any] = field(default_factory=dict)  # name → the client's own entry
    kept: dict[str, str] = field(default_factory=dict)  # name → why it stays with the client
    missing: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # servers whose entry in a stale toolwise config changes
    left: list[str] = field(default_factory=list)  # servers a stale toolwise config serves that the client lacks

    @property
    def writes(self) -> bool:
        return self.toolwise_after is not None and self.toolwise_after != self.toolwise_before

    @property
    def serves(self) -> bool:
        """Its servers go through toolwise (it has a toolwise config to write or that is written)."""
        return self.toolwise_after is not None

    @property
    def of(self) -> str:
        return "" if self.where == USER_SCOPE else f" of project {self.where}"


@dataclass
class Plan:
    """What install or undo would write: the client's file before and after, and per scope its toolwise
    config's text before (None: no file) and after; what the user should know of it (`warnings`)."""

    client_path: Path
    client_before: str
    client_after: str
    scopes: list[Scope] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.client_before != self.client_after or any(scope.writes for scope in self.scopes)

    def diff(self) -> str:
        """The unified diff of every file it writes, secrets masked (`masked.py`): it is printed."""
        parts = [_diff(self.client_path, self.client_before, self.client_after)]
        for scope in self.scopes:
            if scope.toolwise_after is not None:
                parts.append(_diff(scope.toolwise_path, scope.toolwise_before, scope.toolwise_after))
        return mask_text("".join(parts))


def _diff(path: Path, before: str | None, after: str) -> str:
    lines = difflib.unified_diff(
        (before or "").splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=str(path) if before is not None else "/dev/null",
        tofile=str(path),
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)
