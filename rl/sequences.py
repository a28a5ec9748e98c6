"""N-gram model of tool sequences: which tool tends to follow the last one or two, and how well it goes."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass(slots=True)
class NgramStats:
    count: int = 0
    reward_sum: float = 0.0
    successes: int = 0

    @property
    def mean_reward(self) -> float:
        return self.reward_sum / self.count if self.count else 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.count if self.count else 0.0


@dataclass(slots=True)
class NextTool:
    tool: str
    score: float
    count: int
    success_rate: float
    mean_reward: float
    prefix: tuple[str, ...]
    reason: str


class SequenceModel:
    """Counts every n-gram (n = 2..max_n) of session tool sequences, keyed by prefix then next tool:
    recommending is one dict lookup per prefix length, longest first (back-off)."""

    SCHEMA = 2  # 1: a list of rows (still loaded)

    def __init__(self, max_n: int = 3, min_count: int = 2) -> None:
        if max_n < 2 or min_count < 1:
            raise ValueError(f"need max_n ≥ 2 and min_count ≥ 1, got {max_n}, {min_count}")
        self.max_n, self.min_count = max_n, min_count
        self._table: dict[tuple[str, ...], dict[str, NgramStats]] = {}
        self._cold: _Columns | None = None  # a loaded state's prefixes not used yet
        self._size = 0  # n-grams counted

    def __len__(self) -> int:
        """How many distinct n-grams are counted."""
        return self._size

    @property
    def table(self) -> dict[tuple[str, ...], dict[str, NgramStats]]:
        """Every n-gram, by prefix then next tool (builds what a loaded state has not built yet)."""
        if self._cold is not None:
            self._table.update(self._cold.take_all())
            self._cold = None
        return self._table

    def compact(self) -> None:
        """Fold every n-gram back into sorted columns (prefixes become dicts again when used): after a
        replay built a year of them as objects, a third of the memory and a snapshot in milliseconds."""
        self.load_state(self.state_dict())

    def _nexts(self, prefix: tuple[str, ...]) -> dict[str, NgramStats] | None:
        """The tools seen after `prefix`, built from the loaded columns on first use."""
        found = self._table.get(prefix)
        if found is None and self._cold is not None:
            found = self._cold.take(prefix)
            if found is not None:
                self._table[prefix] = found
        return found

    def observe_step(self, history: Sequence[str], tool: str, reward: float, success: bool) -> None:
        """Count `tool` after each suffix (length 1..max_n-1) of the session's `history` so far.
        Feeding a session call by call counts exactly the n-grams of its whole sequence."""
        for length in range(1, min(self.max_n - 1, len(history)) + 1):
            prefix = tuple(history[-length:])
            nexts = self._nexts(prefix)
            if nexts is None:
                nexts = self._table[prefix] = {}
            stats = nexts.get(tool)
            if stats is None:
                stats = nexts[tool] = NgramStats()
                self._size += 1
            stats.count += 1
            stats.reward_sum += reward
            stats.successes += int(success)

    def revise(self, history: Sequence[str], tool: str, reward_delta: float, success_delta: int) -> None:
        """Correct an observed step after the fact (a rating changed its reward and whether it worked)."""
        for length in range(1, min(self.max_n - 1, len(history)) + 1):
            stats = (self._nexts(tuple(history[-length:])) or {}).get(tool)
            if stats is not None:
                stats.reward_sum += reward_delta
                stats.successes = min(stats.count, max(0, stats.successes + success_delta))

    def follow_scores(self, previous_tool: str) -> dict[str, float]:
        """Evidence that each tool works right after `previous_tool`: success rate shrunk by count
        (rate·n/(n+1)), for tools seen there at least `min_count` times."""
        return {
            tool: s.success_rate * s.count / (s.count + 1)
            for tool, s in (self._nexts((previous_tool,)) or {}).items()
            if s.count >= self.min_count
        }

    def follow_score(self, previous_tool: str, tool: str) -> float | None:
        """`follow_scores(previous_tool).get(tool)`, one look-up."""
        s = (self._nexts((previous_tool,)) or {}).get(tool)
        return s.success_rate * s.count / (s.count + 1) if s is not None and s.count >= self.min_count else None

    def recommend_next(
        self, recent_tools: Sequence[str], candidates: Iterable[str] | None = None, top_k: int = 5
    ) -> list[NextTool]:
        """Tools seen ≥ min_count times after the longest matching suffix of `recent_tools`, backing
        off to shorter suffixes to fill `top_k`; ranked by success rate, then count, then mean reward."""
        allowed = None if candidates is None else set(candidates)
        found: dict[str, NextTool] = {}
        for length in range(min(self.max_n - 1, len(recent_tools)), 0, -1):
            prefix = tuple(recent_tools[-length:])
            ranked = sorted(
                (
                    (tool, s)
                    for tool, s in (self._nexts(prefix) or {}).items()
                    if s.count >= self.min_count and (allowed is None or tool in allowed) and tool not in found
                ),
                key=lambda item: (item[1].success_rate, item[1].count, item[1].mean_reward),
                reverse=True,
            )
            for tool, s in ranked:
                found[tool] = NextTool(
                    tool,
                    s.success_rate * s.count / (s.count + 1),
                    s.count,
                    s.success_rate,
                    s.mean_reward,
                    prefix,
                    f"follows {' → '.join(prefix)} → {tool} ({s.count}×, {s.success_rate:.0%} success)",
                )
            if len(found) >= top_k:
                break
        return list(found.values())[:top_k]

    def top_sequences(self, tool: str | None = None, limit: int = 10) -> list[NextTool]:
        """The most frequent successful n-grams (optionally those containing `tool`)."""
        rows = [
            NextTool(
                nxt,
                s.success_rate,
                s.count,
                s.success_rate,
                s.mean_reward,
                prefix,
                f"{' → '.join((*prefix, nxt))} ({s.count}×, {s.success_rate:.0%} success)",
            )
            for prefix, nexts in self.table.items()
            for nxt, s in nexts.items()
            if s.count >= self.min_count and (tool is None or tool == nxt or tool in prefix)
        ]
        rows.sort(key=lambda r: (r.count * r.success_rate, r.mean_reward), reverse=True)
        return rows[:limit]

    def state_dict(self) -> dict[str, Any]:
        """Columnar (interned tool names, numpy columns): a year of n-grams packs and loads in a
        fraction of a second, so a snapshot fits in the time a client gives a stopping server."""
        cold = self._cold
        names: dict[str, int] = dict(cold.ids) if cold is not None else {}
        width = self.max_n - 1
        prefix: list[int] = []
        tool: list[int] = []
        count: list[int] = []
        reward_sum: list[float] = []
        successes: list[int] = []
        for p, nexts in self._table.items():
            ids = [names.setdefault(t, len(names)) for t in p] + [-1] * (width - len(p))
            prefix.extend(ids * len(nexts))
            for t, stats in nexts.items():
                tool.append(names.setdefault(t, len(names)))
                count.append(stats.count)
                reward_sum.append(stats.reward_sum)
                successes.append(stats.successes)
        columns = {
            "prefix": np.array(prefix, dtype=np.int32).reshape(len(tool), width),
            "tool": np.array(tool, dtype=np.int32),
            "count": np.array(count, dtype=np.int64),
            "reward_sum": np.array(reward_sum, dtype=np.float64),
            "successes": np.array(successes, dtype=np.int64),
        }
        if cold is not None:  # the loaded rows of prefixes never used since, as they were
            unused = cold.unused()
            columns = {k: np.concatenate([cold.columns[k][unused], v]) for k, v in columns.items()}
        head = {"schema": self.SCHEMA, "max_n": self.max_n, "min_count": self.min_count, "names": list(names)}
        return {**head, **columns}

    def load_state(self, state: dict[str, Any]) -> None:
        if state["schema"] not in (1, self.SCHEMA):
            raise ValueError(f"sequence state schema {state['schema']} is not {self.SCHEMA}")
        self.__init__(state["max_n"], state["min_count"])  # type: ignore[misc]  # reset to the loaded size: __init__ sets every field
        if state["schema"] == 1:  # rows of [prefix, tool, count, reward_sum, successes]
            for prefix, tool, count, reward_sum, successes in state["ngrams"]:
                self._table.setdefault(tuple(prefix), {})[tool] = NgramStats(count, reward_sum, successes)
            self._size = sum(len(nexts) for nexts in self._table.values())
            return
        self._size = len(state["tool"])
        width = self.max_n - 1
        if len(state["names"]) + 1 < (1 << (62 // max(width, 1))):  # prefix keys fit in an int64
            self._cold = _Columns(state, width)
            return
        table, names = self._table, state["names"]
        keys: dict[tuple[int, ...], dict[str, NgramStats]] = {}
        columns = zip(
            map(tuple, state["prefix"].tolist()),
            state["tool"].tolist(),
            state["count"].tolist(),
            state["reward_sum"].tolist(),
            state["successes"].tolist(),
            strict=True,
        )
        for ids, tool, count, reward_sum, successes in columns:
            nexts = keys.get(ids)
            if nexts is None:
                nexts = keys[ids] = table[tuple(names[i] for i in ids if i >= 0)] = {}
            nexts[names[tool]] = NgramStats(count, reward_sum, successes)


class _Columns:
    """A loaded state's n-grams kept as its columns, sorted by prefix (an int64 key of the prefix's
    name ids): loading a year of n-grams sorts arrays instead of building a million objects, and a
    prefix's tools become dicts the first time something asks for them."""

    def __init__(self, state: dict[str, Any], width: int) -> None:
        self.names: list[str] = list(state["names"])
        self.ids = {name: i for i, name in enumerate(self.names)}
        self.base = len(self.names) + 1
        prefix = np.asarray(state["prefix"], dtype=np.int64).reshape(-1, width)
        keys = self._key(prefix)
        order = np.argsort(keys, kind="stable")
        self.columns = {k: np.asarray(state[k])[order] for k in ("tool", "count", "reward_sum", "successes")}
        self.columns["prefix"] = np.asarray(state["prefix"]).reshape(-1, width)[order]
        self.keys, self.starts = np.unique(keys[order], return_index=True)
        self.ends = np.append(self.starts[1:], len(order)) if len(order) else self.starts.copy()
        self.used = np.zeros(len(self.keys), dtype=bool)

    def _key(self, ids: NDArray[np.int64]) -> NDArray[np.int64]:
        """One int64 per prefix row: Σ (id + 1)·base^j (−1 padding adds 0)."""
        weights = self.base ** np.arange(ids.shape[1], dtype=np.int64)
        return (ids + 1) @ weights

    def take(self, prefix: tuple[str, ...]) -> dict[str, NgramStats] | None:
        """The prefix's tools as stats, once (None if the state had none, or they were taken)."""
        ids = [self.ids.get(name) for name in prefix]
        width = self.columns["prefix"].shape[1]
        if None in ids or len(ids) > width:
            return None
        key = int(self._key(np.array([[*ids, *[-1] * (width - len(ids))]], dtype=np.int64))[0])
        group = int(np.searchsorted(self.keys, key))
        if group >= len(self.keys) or self.keys[group] != key or self.used[group]:
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
        """Which rows belong to prefixes not taken yet."""
        return np.repeat(~self.used, self.ends - self.starts)
