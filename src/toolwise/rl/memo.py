"""A bounded memo that forgets the least recently used entry first.

Real agents repeat their requests, so what was computed for a query text (its embedding, its BM25 row)
is worth keeping across decisions and across the runs the learning thread learns; a memo emptied when
full dropped a run's queries midway and, cycling through more distinct queries than it holds, kept
none. An LRU keeps the recent ones at the cost of a move per hit.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Memo(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a memo holds at least one entry, got capacity {capacity}")
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: K) -> bool:
        return key in self._entries

    def get(self, key: K) -> V | None:
        """The value kept for `key` (now the most recently used), or None."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> V:
        """Keep `value` for `key`, forgetting the least recently used entries beyond the capacity."""
        entries = self._entries
        entries[key] = value
        entries.move_to_end(key)
        while len(entries) > self.capacity:
            entries.popitem(last=False)
        return value

    def pop(self, key: K) -> V | None:
        """Forget `key`; the value it had, or None."""
        return self._entries.pop(key, None)

    def clear(self) -> None:
        """Forget every entry (a benchmark timing what a new query costs)."""
        self._entries.clear()
