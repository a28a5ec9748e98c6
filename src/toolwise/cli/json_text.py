"""A JSON file's text rewritten to hold a new document with the fewest changes: what the document keeps
keeps its text (a user's compact entries, spacing, key order), what is new or changed is written in the
file's indentation (compactly inside a compact object). A client's config is the user's file: `toolwise
install` and `--undo` show, and make, a diff of the servers they move and nothing else."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

BOM = "\ufeff"  # Notepad saves one; kept in the text, skipped when parsing
_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


@dataclass(frozen=True)
class _Member:
    """One `"key": value` of an object's text, as offsets into it."""

    key: str
    start: int  # the key's opening quote
    key_end: int  # just past the key's closing quote
    value: int  # the value's first character
    end: int  # just past the value


def dumped(doc: Any, like: str | None = None) -> str:
    """`doc` as JSON text: `like` (the file's text now) edited as little as holds it (its byte order mark
    dropped, as the JSON parsers of Node-based clients refuse one), or with 2 spaces for a new file."""
    if like is None:
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    body = like.removeprefix(BOM)
    start = _skip(body, 0)
    old, end = _DECODER.raw_decode(body, start)
    edit = _Edit(body, _indent_unit(body), "\r\n" if "\r\n" in body else "\n")
    return body[:start] + edit.value(start, end, old, doc, compact="\n" not in body[start:end]) + body[end:]


@dataclass(frozen=True)
class _Edit:
    text: str
    unit: int | str  # one level of indentation: a number of spaces, or "\t"
    newline: str

    def value(self, start: int, end: int, old: Any, new: Any, *, compact: bool) -> str:
        """The text of `new` in place of `old`, the value at text[start:end]."""
        if _same(old, new):
            return self.text[start:end]
        if isinstance(old, dict) and isinstance(new, dict) and old and new:
            return self._object(start, old, new)
        return self._fresh(new, self._line_indent(start), compact=compact)

    def _object(self, start: int, old: dict[str, Any], new: dict[str, Any]) -> str:
        """An object both versions have: its members kept, edited, added or dropped, in `new`'s order, with
        the object's own separators."""
        members, close = _members(self.text, start)
        text = self.text
        lead = text[start + 1 : members[0].start]
        between = text[members[0].end : members[1].start] if len(members) > 1 else "," + lead
        colon = text[members[0].key_end : members[0].value]
        compact = "\n" not in lead
        indent = lead[lead.rfind("\n") + 1 :]
        found = {m.key: m for m in members}  # the last of a repeated key, as the parser keeps
        parts = []
        for key, value in new.items():
            m = found.get(key)
            if m is None:
                fresh = self._fresh(value, indent, compact=compact)
                parts.append(json.dumps(key, ensure_ascii=False) + colon + fresh)
            else:
                parts.append(text[m.start : m.value] + self.value(m.value, m.end, old[key], value, compact=compact))
        return "{" + lead + between.join(parts) + text[members[-1].end : close] + "}"

    def _fresh(self, value: Any, indent: str, *, compact: bool) -> str:
        if compact:
            return json.dumps(value, ensure_ascii=False)
        lines = json.dumps(value, indent=self.unit, ensure_ascii=False).split("\n")
        return (self.newline + indent).join(lines)

    def _line_indent(self, at: int) -> str:
        line = self.text[self.text.rfind("\n", 0, at) + 1 : at]
        return line[: len(line) - len(line.lstrip(" \t"))]


def _same(old: Any, new: Any) -> bool:
    """Equal as JSON (1 is not true, 1 is not 1.0), whatever the order of keys."""
    return json.dumps(old, sort_keys=True) == json.dumps(new, sort_keys=True)


def _members(text: str, start: int) -> tuple[list[_Member], int]:
    """The members of the (valid, non-empty) object whose `{` is at `start`, and where its `}` is."""
    members: list[_Member] = []
    at = _skip(text, start + 1)
    while True:
        key, key_end = _DECODER.raw_decode(text, at)
        value = _skip(text, _skip(text, key_end) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, value)
        members.append(_Member(key, at, key_end, value, end))
        at = _skip(text, end)
        if text[at] == "}":
            return members, at
        at = _skip(text, at + 1)  # past the comma


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _indent_unit(text: str) -> int | str:
    """The file's indentation, as its first indented line has it (2 spaces when none is)."""
    for line in text.splitlines()[1:]:
        stripped = line.lstrip(" \t")
        if stripped and stripped != line:
            lead = line[: len(line) - len(stripped)]
            return "\t" if lead.startswith("\t") else len(lead)
    return 2
