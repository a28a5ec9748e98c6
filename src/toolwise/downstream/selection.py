"""Which of a downstream's tools toolwise offers: a server's `includeTools` / `excludeTools` (names or
fnmatch globs). A tool left out is not listed, not callable and not learned; a name in either list that
matches none of the server's tools is a warning (a typo would otherwise filter nothing, or everything)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from fnmatch import fnmatchcase

import mcp_types as types

from toolwise.config import ServerSpec

log = logging.getLogger(__name__)


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def matching_none(patterns: Sequence[str], names: Sequence[str]) -> list[str]:
    """The names or globs of `patterns` that match none of `names`: a typo, which selects nothing."""
    return [pattern for pattern in patterns if not any(fnmatchcase(name, pattern) for name in names)]


def unmatched(spec: ServerSpec, names: list[str]) -> dict[str, list[str]]:
    """The patterns of `includeTools` / `excludeTools` that match none of `names`, by key: a typo."""
    lists = {"includeTools": spec.include_tools or [], "excludeTools": list(spec.exclude_tools)}
    found = {key: matching_none(patterns, names) for key, patterns in lists.items()}
    return {key: patterns for key, patterns in found.items() if patterns}


def offered(server: str, spec: ServerSpec, tools: list[types.Tool]) -> list[types.Tool]:
    """The tools of `server` its spec lets through, in the server's order."""
    if spec.include_tools is None and not spec.exclude_tools:
        return tools
    names = [tool.name for tool in tools]
    for key, unknown in unmatched(spec, names).items():
        log.warning(
            "downstream %s: %s names no tool it lists: %s (its tools: %s)",
            server,
            key,
            ", ".join(unknown),
            ", ".join(names) or "none",
        )
    return [t for t in tools if lets_through(spec, t.name)]


def lets_through(spec: ServerSpec, name: str) -> bool:
    """Whether the server's `includeTools` / `excludeTools` offer its tool `name`."""
    include = spec.include_tools
    return (include is None or _matches(name, include)) and not _matches(name, spec.exclude_tools)
