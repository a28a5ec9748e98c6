"""Names of re-exposed tools and prompts: `prefix__tool` (the prefix is the server's name unless
configured; an empty prefix keeps the bare name), only [A-Za-z0-9_-], at most 64 characters, unique."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from toolwise.config import closest

SEPARATOR = "__"
MAX_LENGTH = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _clean(name: str) -> str:
    return _UNSAFE.sub("_", name) or "_"


def namespaced(server: str, tool: str) -> str:
    """`server__tool` (`tool` when `server` is ""), unsafe characters replaced; too long → truncated
    with a stable hash suffix."""
    name = f"{_clean(server)}{SEPARATOR}{_clean(tool)}" if server else _clean(tool)
    if len(name) <= MAX_LENGTH:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{name[: MAX_LENGTH - 9]}-{digest}"


def carries_prefix(name: str, prefix: str) -> bool:
    """`name` could be a public name under `prefix` (`namespaced(prefix, …)`); never for an empty prefix."""
    return bool(prefix) and name.startswith(_clean(prefix) + SEPARATOR)


def meant(tool: str, names: Iterable[str]) -> str:
    """`; did you mean 'server__tool'?` for a downstream's own tool name, or a near miss of one, or ""."""
    name = meant_name(tool, names)
    return f"; did you mean {name!r}?" if name else ""


def meant_name(tool: str, names: Iterable[str]) -> str | None:
    """The listed name an unknown `tool` stands for, its case aside (`TIME__CONVERT_TIME`): the same
    name, else `time__convert_time` for a downstream's own name `convert_time` (agents and people ask
    for that), else the closest near miss, else None."""
    known: dict[str, str] = {}  # case-folded → listed (of names equal but for case, the first sorted)
    for name in sorted(set(names)):
        known.setdefault(name.casefold(), name)
    asked = tool.casefold()
    prefixed = sorted(folded for folded in known if folded == asked or folded.endswith(SEPARATOR + asked))
    near = min(prefixed, key=lambda folded: folded != asked) if prefixed else closest(asked, known)
    return None if near is None else known[near]


def assign(
    pairs: Iterable[tuple[str, str]],
    prefixes: Mapping[str, str] | None = None,
    reserved: Iterable[str] = (),
    kept: Mapping[tuple[str, str], str] | None = None,
) -> dict[tuple[str, str], str]:
    """Unique public names for (server, tool) pairs, each under its server's prefix (default: the
    server's name), none of them `reserved` (toolwise's own tools). `kept`: the names pairs had before a
    tool list changed, which those still listed keep (a client holds them: `files/read` stays
    `u__files_read-2` when `files.read` goes, never taking the name a client was listed for another tool).
    Collisions (after cleaning or truncation, or of bare names) are resolved deterministically: pairs are
    taken in sorted order and later ones get `-2`, `-3`, … The names come in (server, tool) order."""
    listed = set(pairs)
    taken: set[str] = set(reserved)
    names: dict[tuple[str, str], str] = {}
    for pair, name in sorted((kept or {}).items()):
        if pair in listed and name not in taken:
            taken.add(name)
            names[pair] = name
    for server, tool in sorted(listed - names.keys()):
        prefix = server if prefixes is None else prefixes.get(server, server)
        base = candidate = namespaced(prefix, tool)
        n = 2
        while candidate in taken:
            suffix = f"-{n}"
            candidate = base[: MAX_LENGTH - len(suffix)] + suffix
            n += 1
        taken.add(candidate)
        names[(server, tool)] = candidate
    return {pair: names[pair] for pair in sorted(names)}  # one order, whichever names were kept
