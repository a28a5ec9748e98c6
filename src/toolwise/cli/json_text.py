"""A JSON file's text rewritten to hold a new document with the fewest changes: what the document keeps
keeps its text (a user's compact entries, spacing, key order), what is new or changed is written in the
file's indentation (compactly inside a compact object). A client's config is the user's file: `toolwise
install` and `--undo` show, and make, a diff of the servers they move and nothing else. A value another
file holds (a server moved out of the client's config into toolwise's) is written as that file has it: its
line breaks kept (an entry on one line stays on one line), re-indented to where it lands."""

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


@dataclass(frozen=True)
class Written:
    """A value as a file's text has it, to be written in another file as it was (`dumped`'s `written`)."""

    text: str  # from its first character to its last
    indent: str  # the indentation of the line it starts on
    unit: int | str  # its file's indentation

    def at(self, indent: str, unit: int | str, newline: str) -> str:
        """The text on a line indented `indent` of a file indented by `unit`: each line after the first as
        deep, in levels, below the first as it was."""
        lines = self.text.replace("\r\n", "\n").split("\n")
        out = [lines[0]]
        for line in lines[1:]:
            body = line.lstrip(" \t")
            lead = line[: len(line) - len(body)]
            extra = lead.removeprefix(self.indent) if lead.startswith(self.indent) else ""
            if self.unit == "\t":
                levels, rest = extra.count("\t"), extra.replace("\t", "")
            else:
                levels, spaces = divmod(len(extra), int(self.unit))
                rest = " " * spaces
            out.append(indent + _unit_text(unit) * levels + rest + body)
        return newline.join(out)


def written_values(text: str, paths: list[tuple[str, ...]]) -> dict[str, Written]:
    """The members' values of the objects at `paths` (keys from the top) in the JSON `text`, as written,
    by what they hold (`_canonical`); a path the document lacks, or that is not an object, gives none."""
    body = text.removeprefix(BOM)
    unit, found = _indent_unit(body), {}
    members: dict[int, list[_Member]] = {}  # by the object's start: one found on several paths is read once
    for path in paths:
        at = _skip(body, 0)
        for key in path:
            if body[at : at + 1] != "{" or (m := _member(body, at, key, members)) is None:
                break
            at = m.value
        else:
            if body[at : at + 1] != "{":
                continue
            for m in _members_at(body, at, members):
                value = json.loads(body[m.value : m.end])
                line = body[body.rfind("\n", 0, m.value) + 1 : m.value]
                indent = line[: len(line) - len(line.lstrip(" \t"))]
                found[_canonical(value)] = Written(body[m.value : m.end], indent, unit)
    return found


def _member(text: str, start: int, key: str, cache: dict[int, list[_Member]]) -> _Member | None:
    """The member `key` of the object at `start` (the last of a repeated key, as the parser keeps)."""
    return next((m for m in reversed(_members_at(text, start, cache)) if m.key == key), None)


def _members_at(text: str, start: int, cache: dict[int, list[_Member]]) -> list[_Member]:
    if start not in cache:
        cache[start] = [] if text[_skip(text, start + 1)] == "}" else _members(text, start)[0]
    return cache[start]


def dumped(doc: Any, like: str | None = None, written: dict[str, Written] | None = None) -> str:
    """`doc` as JSON text: `like` (the file's text now) edited as little as holds it (its byte order mark
    dropped, as the JSON parsers of Node-based clients refuse one), or with 2 spaces for a new file. A value
    of `doc` (new or changed) that is one of `written` is written as that text has it."""
    if like is None:
        return _Edit("", 2, "\n", written or {})._fresh(doc, "", compact=False) + "\n"
    body = like.removeprefix(BOM)
    start = _skip(body, 0)
    old, end = _DECODER.raw_decode(body, start)
    edit = _Edit(body, _indent_unit(body), "\r\n" if "\r\n" in body else "\n", written or {})
    return body[:start] + edit.value(start, end, old, doc, compact="\n" not in body[start:end]) + body[end:]


@dataclass(frozen=True)
class _Edit:
    text: str
    unit: int | str  # one level of indentation: a number of spaces, or "\t"
    newline: str
    written: dict[str, Written]  # values to write as another file has them, by `_canonical`

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
        """`value` written anew on a line indented `indent`: as `written` has it, if it does (on one line,
        inside a compact object), else in the file's indentation (on one line inside a compact object)."""
        known = self.written.get(_canonical(value)) if self.written else None
        if known is not None and not (compact and "\n" in known.text):
            return known.at(indent, self.unit, self.newline)
        if compact:
            return json.dumps(value, ensure_ascii=False)
        if self.written and isinstance(value, dict) and value:  # a member may be one of `written`
            inner = indent + _unit_text(self.unit)
            members = [
                json.dumps(k, ensure_ascii=False) + ": " + self._fresh(v, inner, compact=False)
                for k, v in value.items()
            ]
            return "{" + self.newline + inner + ("," + self.newline + inner).join(members) + self.newline + indent + "}"
        lines = json.dumps(value, indent=self.unit, ensure_ascii=False).split("\n")
        return (self.newline + indent).join(lines)

    def _line_indent(self, at: int) -> str:
        line = self.text[self.text.rfind("\n", 0, at) + 1 : at]
        return line[: len(line) - len(line.lstrip(" \t"))]


def _same(old: Any, new: Any) -> bool:
    """Equal as JSON (1 is not true, 1 is not 1.0), whatever the order of keys."""
    return _canonical(old) == _canonical(new)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _unit_text(unit: int | str) -> str:
    return unit if isinstance(unit, str) else " " * unit


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
