"""Interning strings to dense integer ids, so state lives in numpy arrays rather than dicts of strings."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numpy.typing import NDArray


class Interner:
    def __init__(self, names: Iterable[str] = ()) -> None:
        self._ids: dict[str, int] = {}
        self.names: list[str] = []
        for name in names:
            self.intern(name)

    def intern(self, name: str) -> int:
        """The id of `name`, assigning the next free one on first sight."""
        found = self._ids.get(name)
        if found is not None:
            return found
        self._ids[name] = len(self.names)
        self.names.append(name)
        return len(self.names) - 1

    def get(self, name: str) -> int | None:
        return self._ids.get(name)

    def ids(self, names: Iterable[str], missing: int = -1) -> list[int]:
        """The id of each of `names` (`missing` for a name never interned), one dict look-up each."""
        get = self._ids.get
        return [get(name, missing) for name in names]

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self._ids


def grown_rows(rows: int, ids: Iterable[int]) -> int:
    """The rows a table indexed by id has once grown for each of `ids` in turn: doubled, or to the id's row
    if that is more. A run's ids grown for at once come to the shape one at a time gives."""
    for i in ids:
        if i >= rows:
            rows = max(2 * rows, i + 1)
    return rows


def in_order(ids: NDArray[np.int64]) -> bool:
    """Whether `ids` are 0, 1, …, n − 1: a table's rows taken by them are its first n rows, a slice."""
    return len(ids) == 0 or (int(ids[0]) == 0 and int(ids[-1]) == len(ids) - 1 and bool((np.diff(ids) == 1).all()))
