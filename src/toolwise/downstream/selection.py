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


def offered(server: str, spec: ServerSpec, tools: list[types.Tool]) -> list[types.Tool]:
    """The tools of `server` its spec lets through, in the server's order."""
    include, exclude = spec.include_tools, list(spec.exclude_tools)
    if include is None and not exclude:
        return tools
    names = [tool.name for tool in tools]
    for key, patterns in (("includeTools", include or []), ("excludeTools", exclude)):
        unknown = [p for p in patterns if not any(fnmatchcase(name, p) for name in names)]
        if unknown:
            log.warning(
                "downstream %s: %s names no tool it lists: %s (its tools: %s)",
                server,
                key,
                ", ".join(unknown),
                ", ".join(names) or "none",
            )
    return [t for t in tools if (include is None or _matches(t.name, include)) and not _matches(t.name, exclude)]
