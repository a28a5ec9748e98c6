"""The `inspect` tables at the terminal's width: tool names shortened in the middle, never into each other.

A rich table squeezed into 80 columns cuts a cell's end (`github__list_pull_requ…`), so tools that
share a prefix, as a server's tools do, show as identical rows. Here prose columns (a query) give way
first, wrapped onto more lines, then name columns (the widest first, down to `MIN_TEXT`): a shrunk
name keeps its head and its tail around a `…`,
with the split chosen so that names distinct in full stay distinct; when no split can (names equal but
for their middle) they are folded onto several lines instead. `--wide` prints every name whole.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rich.table import Table

ELLIPSIS = "…"
MIN_TEXT = 10  # a text column is not shrunk below this many characters
PLOT_POINTS = (5, 100)  # the fewest and most slices `inspect plot` picks on its own


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    kind: Literal["name", "text", "figure"] = "figure"  # name: middle-elided; text: wrapped; figure: whole


def elide_middle(name: str, width: int, head: int | None = None) -> str:
    """`name` in at most `width` characters: its first `head` (default: about a third) and its last
    ones around `…`."""
    if len(name) <= width:
        return name
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 3 if head is None else head
    tail = width - 1 - head
    return name[:head] + ELLIPSIS + (name[-tail:] if tail else "")


def distinct_names(names: Sequence[str], width: int) -> dict[str, str] | None:
    """Each name in at most `width` characters, middle-elided with one split for all, such that names
    distinct in full stay distinct; None when no split keeps them apart."""
    unique = list(dict.fromkeys(names))
    if all(len(n) <= width for n in unique):
        return {n: n for n in unique}
    if width < 2:
        return None
    preferred = (width - 1) // 3
    for head in sorted(range(width), key=lambda h: (abs(h - preferred), h)):
        shown = {n: elide_middle(n, width, head) for n in unique}
        if len(set(shown.values())) == len(unique):
            return shown
    return None


def widths(columns: Sequence[Column], rows: Sequence[Sequence[str]], total: int | None) -> list[int]:
    """How wide each column may be for the table to fit `total` characters (None: no limit): every
    column as wide as its widest cell, then the widest text column shrunk one character at a time until
    it fits (or each is at its minimum). The box takes 3 characters a column and 1 more."""
    need = [max([*map(len, c.header.splitlines()), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    if total is None:
        return need
    floor = [min(w, MIN_TEXT) if c.kind != "figure" else w for c, w in zip(columns, need, strict=True)]
    room = total - 3 * len(columns) - 1
    for kind in ("text", "name"):  # prose wraps onto more lines without loss: it gives way first
        while sum(need) > room:
            shrinkable = [i for i, w in enumerate(need) if w > floor[i] and columns[i].kind == kind]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: need[i])
            need[widest] -= 1
    return need


def natural_width(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> int:
    """The width of the table with every cell whole."""
    return sum(widths(columns, rows, total=None)) + 3 * len(columns) + 1


def fitted_table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], total: int | None, *, title: str | None = None
) -> Table:
    """A table of `rows` that fits `total` characters (None: every cell whole, `--wide`)."""
    cut = widths(columns, rows, total) if total is not None else None
    shown = [list(r) for r in rows]
    table = Table(title=title)
    for i, column in enumerate(columns):
        width = cut[i] if cut is not None else None
        fold = False
        if width is not None and column.kind == "name":
            names = distinct_names([r[i] for r in rows], width)
            fold = names is None
            for r in shown:
                r[i] = r[i] if names is None else names[r[i]]
        table.add_column(
            column.header,
            no_wrap=not fold and column.kind != "text",
            overflow="fold",
            min_width=width if column.kind != "figure" else None,
            max_width=width,
        )
    for r in shown:
        table.add_row(*r)
    return table


def plot_slices(calls: int) -> int:
    """How many slices of time `inspect plot` draws for a log of `calls` calls over any span: about
    √calls (the square-root rule for a histogram's bins), so each point averages enough calls to show
    the trend rather than noise, within `PLOT_POINTS`."""
    low, high = PLOT_POINTS
    return max(low, min(high, round(math.sqrt(calls))))
