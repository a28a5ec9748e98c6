"""The n-grams of `ngram_counts.py` as sorted numpy columns over interned tool names: what a loaded
state and a replay's batches count into, without an object an n-gram."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.ngrams import NgramStats

DTYPES = {"prefix": np.int32, "tool": np.int32, "count": np.int64, "reward_sum": np.float64, "successes": np.int64}
KEY_BITS = 20  # bits of a tool id in an n-gram key: about a million tool names (fewer for longer prefixes)


class NgramColumns:
    """N-grams as columns sorted by an int64 key of (prefix, next tool) over interned names: a loaded
    state sorts arrays instead of building a million objects (a prefix's tools become dicts the
    first time something asks for them, `take`), and a replay's batches count into them over arrays
    (`count_batch`): no object an n-gram. New n-grams wait in a small sorted `pending` part, merged
    into the main one when it grows past an eighth of it (or before anything reads the columns)."""

    COLUMNS = ("prefix", "tool", "count", "reward_sum", "successes")

    def __init__(self, names: list[str], width: int, columns: dict[str, NDArray[Any]]) -> None:
        self.names = list(names)
        self.ids = {name: i for i, name in enumerate(self.names)}
        self.width, self.bits = width, key_bits(width)
        prefix = np.asarray(columns["prefix"], dtype=np.int32).reshape(-1, width)
        keys = self._keys(prefix, np.asarray(columns["tool"], dtype=np.int64))
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.columns = {k: np.asarray(columns[k], dtype=DTYPES[k])[order] for k in self.COLUMNS if k != "prefix"}
        self.columns["prefix"] = prefix[order]
        self.pending_keys = np.zeros(0, dtype=np.int64)
        self.pending = {k: v[:0].copy() for k, v in self.columns.items()}
        self._groups(np.zeros(0, dtype=np.int64))

    @staticmethod
    def fits(names: int, width: int) -> bool:
        """Whether `names` tool names fit in the keys (ids up to 2^bits − 2, one key in an int64)."""
        return names + 2 <= 1 << key_bits(width)

    def _prefix_keys(self, prefix: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """One int64 per prefix row: Σ (id + 1)·2^(bits·j) (−1 padding adds 0)."""
        weights = np.left_shift(np.int64(1), self.bits * np.arange(self.width, dtype=np.int64))
        keys: NDArray[np.int64] = (prefix.astype(np.int64) + 1) @ weights
        return keys

    def _keys(self, prefix: NDArray[np.integer[Any]], tool: NDArray[np.integer[Any]]) -> NDArray[np.int64]:
        """One int64 per n-gram: its prefix's key, then its tool's id + 1 in the low bits (sorting by
        it sorts by prefix, then tool)."""
        keys: NDArray[np.int64] = (self._prefix_keys(prefix) << self.bits) + tool.astype(np.int64) + 1
        return keys

    def _groups(self, used_keys: NDArray[np.int64]) -> None:
        """Where each prefix's rows are; `used_keys` are the prefixes taken into dicts."""
        self.prefixes, self.starts = np.unique(self.keys >> self.bits, return_index=True)
        self.ends = np.append(self.starts[1:], len(self.keys)) if len(self.keys) else self.starts.copy()
        self.used = np.isin(self.prefixes, used_keys)

    def intern(self, name: str) -> int:
        found = self.ids.get(name)
        if found is None:
            found = self.ids[name] = len(self.names)
            self.names.append(name)
        return found

    # -- a replay's batches ------------------------------------------------------------------------

    def count_batch(
        self,
        look_keys: NDArray[np.int64],
        keys: NDArray[np.int64],
        prefix: NDArray[np.int32],
        tool: NDArray[np.int32],
        rewards: NDArray[np.float64],
        successes: NDArray[np.int64],
    ) -> tuple[NDArray[np.int64], NDArray[np.int64], int]:
        """Count and successes of each of `look_keys` as they stand (0 where never seen), then `add`
        the observed n-grams `keys`. Returns both and how many n-grams were new."""
        count, worked = np.zeros(len(look_keys), dtype=np.int64), np.zeros(len(look_keys), dtype=np.int64)
        for part, columns in ((self.keys, self.columns), (self.pending_keys, self.pending)):
            at, hit = self._find(part, look_keys)
            count[hit] += columns["count"][at[hit]]
            worked[hit] += columns["successes"][at[hit]]
        return count, worked, self.add(keys, prefix, tool, rewards, successes)

    def add(
        self,
        keys: NDArray[np.int64],
        prefix: NDArray[np.int32],
        tool: NDArray[np.int32],
        rewards: NDArray[np.float64],
        successes: NDArray[np.int64],
    ) -> int:
        """Count each observed n-gram (key, its prefix ids and tool id, its step's reward and success),
        in order: each sum moves as one step at a time moves it. Returns how many n-grams are new."""
        unique, first, where = np.unique(keys, return_index=True, return_inverse=True)
        at, hit = self._find(self.keys, unique)
        pending_at, pending_hit = self._find(self.pending_keys, unique)
        fresh = ~hit & ~pending_hit
        if fresh.any():
            into = np.searchsorted(self.pending_keys, unique[fresh])
            self.pending_keys = np.insert(self.pending_keys, into, unique[fresh])
            rows = {"prefix": prefix[first[fresh]], "tool": tool[first[fresh]]}
            for k, v in self.pending.items():
                added = rows[k] if k in rows else np.zeros(int(fresh.sum()), v.dtype)
                self.pending[k] = np.insert(v, into, added, axis=0)
            pending_at, pending_hit = self._find(self.pending_keys, unique)
        for rows_at, found, columns in ((at, hit, self.columns), (pending_at, pending_hit, self.pending)):
            mine = found[where]
            if mine.any():
                rows_of = rows_at[where[mine]]
                np.add.at(columns["count"], rows_of, 1)
                np.add.at(columns["reward_sum"], rows_of, rewards[mine])
                np.add.at(columns["successes"], rows_of, successes[mine])
        if len(self.pending_keys) > max(4096, len(self.keys) // 8):
            self.flush()
        return int(fresh.sum())

    @staticmethod
    def _find(part: NDArray[np.int64], keys: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        if not len(part):
            return np.zeros(len(keys), dtype=np.intp), np.zeros(len(keys), dtype=bool)
        at = np.minimum(np.searchsorted(part, keys), len(part) - 1)
        return at, part[at] == keys

    def flush(self) -> None:
        """Merge the pending n-grams into the main columns."""
        if not len(self.pending_keys):
            return
        used_keys = self.prefixes[self.used]
        at = np.searchsorted(self.keys, self.pending_keys)
        self.keys = np.insert(self.keys, at, self.pending_keys)
        for k, v in self.columns.items():
            self.columns[k] = np.insert(v, at, self.pending[k], axis=0)
        self.pending_keys = self.pending_keys[:0]
        self.pending = {k: v[:0] for k, v in self.pending.items()}
        self._groups(used_keys)

    def put(self, prefix: tuple[str, ...], nexts: dict[str, NgramStats]) -> None:
        """A prefix's tools back from a dict (see `take`) into the columns, as they are now."""
        if not nexts:
            return
        ids = [self.intern(name) for name in prefix] + [-1] * (self.width - len(prefix))
        tools = np.array([self.intern(t) for t in nexts], dtype=np.int32)
        rows = np.array([ids] * len(tools), dtype=np.int32).reshape(-1, self.width)
        keys = self._keys(rows, tools)
        stats = list(nexts.values())
        values = {
            "count": np.array([s.count for s in stats], dtype=np.int64),
            "reward_sum": np.array([s.reward_sum for s in stats], dtype=np.float64),
            "successes": np.array([s.successes for s in stats], dtype=np.int64),
        }
        self.add(keys, rows, tools, np.zeros(len(keys)), np.zeros(len(keys), dtype=np.int64))  # rows for new ones
        for part, columns in ((self.keys, self.columns), (self.pending_keys, self.pending)):
            at, hit = self._find(part, keys)
            for k, v in values.items():
                columns[k][at[hit]] = v[hit]
        group = np.searchsorted(self.prefixes, int(self._prefix_keys(rows[:1])[0]))
        if group < len(self.prefixes) and self.prefixes[group] == int(self._prefix_keys(rows[:1])[0]):
            self.used[group] = False

    # -- reading -----------------------------------------------------------------------------------

    def _group(self, prefix: tuple[str, ...]) -> int | None:
        """The group of rows holding the prefix's tools (None if the state had none, or they were taken)."""
        self.flush()
        key = self._prefix_key(prefix)
        if key is None:
            return None
        group = int(np.searchsorted(self.prefixes, key))
        if group >= len(self.prefixes) or self.prefixes[group] != key or self.used[group]:
            return None
        return group

    def _prefix_key(self, prefix: tuple[str, ...]) -> int | None:
        """`_prefix_keys` of one prefix, in Python ints (no arrays for one key); None for a name never interned."""
        found = [self.ids.get(name) for name in prefix]
        ids = [i for i in found if i is not None]
        if len(ids) < len(found) or len(ids) > self.width:
            return None
        key = 0
        for j, i in enumerate(ids):
            key += (i + 1) << (int(self.bits) * j)
        return key

    def successes(self, prefix: tuple[str, ...]) -> dict[str, int] | None:
        """The prefix's tools that worked and how often, in `take`'s order, read in place (not taken)."""
        group = self._group(prefix)
        if group is None:
            return None
        rows = slice(self.starts[group], self.ends[group])
        names = self.names
        tools, successes = self.columns["tool"][rows].tolist(), self.columns["successes"][rows].tolist()
        return {names[t]: n for t, n in zip(tools, successes, strict=True) if n > 0}

    def successes_many(self, prefixes: list[tuple[str, ...]]) -> dict[tuple[str, ...], dict[str, int]]:
        """`successes` of each of `prefixes` that the columns hold (not taken), their groups found at once and
        the pending part read where it lies (not merged first: a merge moves every row of the columns), each
        prefix's rows in key order, as after a merge."""
        keys: list[int] = []
        asked: list[tuple[str, ...]] = []
        for prefix in prefixes:
            key = self._prefix_key(prefix)
            if key is not None:
                keys.append(key)
                asked.append(prefix)
        if not keys:
            return {}
        wanted = np.array(keys, dtype=np.int64)
        taken = np.zeros(len(wanted), dtype=bool)  # the prefix's group in the main part was taken into a dict
        begin, end = np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=np.int64)
        if len(self.prefixes):
            group = np.minimum(np.searchsorted(self.prefixes, wanted), len(self.prefixes) - 1)
            held = self.prefixes.take(group) == wanted  # the prefix has a group in the main part
            taken = held & self.used.take(group)
            begin, end = np.where(held, self.starts.take(group), 0), np.where(held, self.ends.take(group), 0)
        low = np.searchsorted(self.pending_keys, wanted << self.bits)  # a prefix's n-grams: its key's range
        high = np.searchsorted(self.pending_keys, (wanted + 1) << self.bits)
        names, out = self.names, {}
        for i in np.flatnonzero(~taken & ((end > begin) | (high > low))).tolist():
            found = _rows(self.keys, self.columns, slice(int(begin[i]), int(end[i])))
            if high[i] > low[i]:
                found += _rows(self.pending_keys, self.pending, slice(int(low[i]), int(high[i])))
                found.sort()  # each key is in one part: the merged group's order
            out[asked[i]] = {names[t]: n for _, t, n in found if n > 0}
        return out

    def take(self, prefix: tuple[str, ...]) -> dict[str, NgramStats] | None:
        """The prefix's tools as stats, once (None if the state had none, or they were taken)."""
        group = self._group(prefix)
        if group is None:
            return None
        self.used[group] = True
        rows = slice(self.starts[group], self.ends[group])
        c, names = self.columns, self.names
        return {
            names[t]: NgramStats(n, r, s)
            for t, n, r, s in zip(
                c["tool"][rows].tolist(),
                c["count"][rows].tolist(),
                c["reward_sum"][rows].tolist(),
                c["successes"][rows].tolist(),
                strict=True,
            )
        }

    def take_all(self) -> dict[tuple[str, ...], dict[str, NgramStats]]:
        """Every prefix not taken yet, with its tools (in one pass over the columns)."""
        self.flush()
        unused, names = self.unused(), self.names
        c = {k: v[unused].tolist() for k, v in self.columns.items()}
        self.used[:] = True
        table: dict[tuple[str, ...], dict[str, NgramStats]] = {}
        for ids, tool, count, reward_sum, successes in zip(
            c["prefix"], c["tool"], c["count"], c["reward_sum"], c["successes"], strict=True
        ):
            prefix = tuple(names[i] for i in ids if i >= 0)
            nexts = table.get(prefix)
            if nexts is None:
                nexts = table[prefix] = {}
            nexts[names[tool]] = NgramStats(count, reward_sum, successes)
        return table

    def unused(self) -> NDArray[np.bool_]:
        """Which rows belong to prefixes not taken yet (after `flush`)."""
        return np.repeat(~self.used, self.ends - self.starts)


def _rows(keys: NDArray[np.int64], columns: dict[str, NDArray[Any]], rows: slice) -> list[tuple[int, int, int]]:
    """(key, tool, successes) of `rows` of a part of the columns."""
    return list(
        zip(keys[rows].tolist(), columns["tool"][rows].tolist(), columns["successes"][rows].tolist(), strict=True)
    )


def key_bits(width: int) -> int:
    """Bits of a tool id in an n-gram key of `width` prefix tools and the next tool (≤ 62 in all)."""
    return min(KEY_BITS, 62 // (width + 1))
