"""N-gram counts of tool sequences: which tool tends to follow the last one or two, and how well it goes.

What comes next is an interpolated Witten-Bell estimate over the steps that worked (Witten & Bell
1991; Chen & Goodman 1998, §2.4): P(w | h) = (c(h, w) + T(h)·P(w | h⁻)) / (c(h) + T(h)), where h⁻ drops
the oldest tool of h, c counts the steps that worked, T(h) is how many distinct tools worked after h,
and the recursion ends at the unigram c(w) / N. A prefix seen once still answers, an unseen one backs
off to the shorter one, and a session's first step (no prefix) gets the tools that work most often.
Witten-Bell needs only the counts after each prefix, which the table already keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolwise.rl.ngram_columns import NgramColumns
from toolwise.rl.ngram_state import packed, packed_unigrams, unigrams_from_bigram_columns, unpacked, unpacked_unigrams
from toolwise.rl.ngrams import FAILED, NextTool, NgramStats, failed


class NgramCounts:
    """Counts every n-gram (n = 2..max_n) of session tool sequences, keyed by prefix then next tool:
    recommending is one dict lookup per prefix length, longest first (back-off)."""

    SCHEMA = 3  # 1: a list of rows; 2: no unigrams (both still loaded)

    def __init__(self, max_n: int = 3, min_count: int = 2) -> None:
        if max_n < 2 or min_count < 1:
            raise ValueError(f"need max_n ≥ 2 and min_count ≥ 1, got {max_n}, {min_count}")
        self.max_n, self.min_count = max_n, min_count
        self._table: dict[tuple[str, ...], dict[str, NgramStats]] = {}
        self._cold: NgramColumns | None = None  # a loaded state's prefixes not used yet
        self._size = 0  # n-grams counted
        self.unigrams: dict[str, NgramStats] = {}  # every step of every session, first steps included
        self._unigram_p: dict[str, float] | None = None  # P(w) over the unigrams that worked, until they move
        self._called_p: dict[str, float] | None = None  # P(w) over every call, until they move

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
        replay built a year of them as objects, a fraction of the memory and a quick snapshot."""
        if self._table or self._cold is None:
            self.load_state(self.state_dict())
        else:
            self._cold.flush()

    def _nexts(self, prefix: tuple[str, ...]) -> dict[str, NgramStats] | None:
        """The tools seen after `prefix`, built from the loaded columns on first use."""
        found = self._table.get(prefix)
        if found is None and self._cold is not None:
            found = self._cold.take(prefix)
            if found is not None:
                self._table[prefix] = found
        return found

    def _after_worked(self, prefix: tuple[str, ...]) -> dict[str, NgramStats]:
        """The tools counted after `prefix` when its last call worked: its counts less those counted after
        the prefix with that call marked failed (a step after a failed call is counted under both)."""
        nexts = self._nexts(prefix) or {}
        marked = self._nexts((*prefix[:-1], failed(prefix[-1])))
        if not marked:
            return nexts
        left = {}
        for tool, s in nexts.items():
            m = marked.get(tool)
            if m is None:
                left[tool] = s
            elif s.count > m.count:
                left[tool] = NgramStats(s.count - m.count, s.reward_sum - m.reward_sum, s.successes - m.successes)
        return left

    def _worked_after(self, prefix: tuple[str, ...]) -> dict[str, int]:
        """The tools that worked after `prefix` and how often, read where they are: a prefix still in the
        loaded columns is read there, not taken into a dict (a run reads many, and puts them back after)."""
        found = self._table.get(prefix)
        if found is not None:
            return _worked(found)
        return (self._cold.successes(prefix) if self._cold is not None else None) or {}

    def observe_step(
        self, history: Sequence[str], tool: str, reward: float, success: bool, *, after_failure: bool = False
    ) -> None:
        """Count `tool` (a unigram) and `tool` after each suffix (length 1..max_n-1) of the session's
        `history` so far. Feeding a session call by call counts exactly the n-grams of its whole sequence.
        `after_failure`: the last call of `history` failed (counted again after its marked prefixes)."""
        self._count_unigram(tool, 1, reward, int(success))
        for prefix in self._prefixes(history, after_failure):
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

    def _prefixes(self, history: Sequence[str], after_failure: bool) -> list[tuple[str, ...]]:
        """The prefixes a step after `history` counts under: each suffix, and with `after_failure` each
        suffix again with its last tool marked failed."""
        suffixes = [tuple(history[-length:]) for length in range(1, min(self.max_n - 1, len(history)) + 1)]
        if after_failure and suffixes:
            suffixes += [(*prefix[:-1], failed(prefix[-1])) for prefix in suffixes]
        return suffixes

    def _count_unigram(self, tool: str, count: int, reward_sum: float, successes: int) -> None:
        stats = self.unigrams.get(tool)
        if stats is None:
            stats = self.unigrams[tool] = NgramStats()
        stats.count += count
        stats.reward_sum += reward_sum
        stats.successes += successes
        self._unigram_p = self._called_p = None

    def revise(
        self,
        history: Sequence[str],
        tool: str,
        reward_delta: float,
        success_delta: int,
        *,
        after_failure: bool = False,
    ) -> None:
        """Correct an observed step after the fact (a rating changed its reward and whether it worked);
        `after_failure` as the step was observed."""
        stats = self.unigrams.get(tool)
        if stats is not None:
            stats.reward_sum += reward_delta
            stats.successes = min(stats.count, max(0, stats.successes + success_delta))
            self._unigram_p = None
        for prefix in self._prefixes(history, after_failure):
            stats = (self._nexts(prefix) or {}).get(tool)
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

    def next_distribution(self, history: Sequence[str]) -> dict[str, float]:
        """P(next tool | the last max_n − 1 tools of `history`), interpolated Witten-Bell over the steps
        that worked (see the module's docstring): sums to 1 over the tools that ever worked, empty
        before any did. A tool never seen after the prefix still gets its backed-off share."""
        unigram, levels = self.backoff(history)
        probability = dict(unigram)
        for keep, shares in levels:
            for tool in probability:
                probability[tool] *= keep
            for tool, share in shares.items():
                probability[tool] = probability.get(tool, 0.0) + share
        return probability

    def backoff(self, history: Sequence[str]) -> tuple[dict[str, float], list[tuple[float, dict[str, float]]]]:
        """`next_distribution`'s parts: the unigram P (the same dict, read-only, while the unigrams stand)
        and, shortest prefix first, each seen prefix's back-off weight and its own shares: the distribution
        is P ← P·keep + shares at each level (a caller that keeps P as an array computes it so)."""
        levels: list[tuple[float, dict[str, float]]] = []
        for length in range(1, min(self.max_n - 1, len(history)) + 1):  # shortest prefix first
            worked = self._worked_after(tuple(history[-length:]))
            if worked:  # an unseen prefix: the shorter one's estimate stands
                levels.append(_level(worked))
        return self._unigram_probabilities(), levels

    def backoffs(
        self, histories: Sequence[Sequence[str]]
    ) -> list[tuple[dict[str, float], list[tuple[float, dict[str, float]]]]]:
        """`backoff` of each of `histories` (a run's distinct ones): each distinct prefix's level computed
        once (read-only, shared by the histories that end in it), those in the loaded columns looked up at once."""
        width = self.max_n - 1
        prefixes = list(dict.fromkeys(tuple(h[-n:]) for h in histories for n in range(1, min(width, len(h)) + 1)))
        cold = [prefix for prefix in prefixes if prefix not in self._table]
        found = self._cold.successes_many(cold) if self._cold is not None and cold else {}
        level: dict[tuple[str, ...], tuple[float, dict[str, float]] | None] = {}
        for prefix in prefixes:
            nexts = self._table.get(prefix)  # as `_worked_after` reads it
            worked = found.get(prefix) if nexts is None else _worked(nexts)
            level[prefix] = _level(worked) if worked else None  # unseen: the shorter prefix's estimate stands
        unigram = self._unigram_probabilities()
        out: list[tuple[dict[str, float], list[tuple[float, dict[str, float]]]]] = []
        for history in histories:
            kept = (level[tuple(history[-n:])] for n in range(1, min(width, len(history)) + 1))
            out.append((unigram, [part for part in kept if part is not None]))
        return out

    def _unigram_probabilities(self) -> dict[str, float]:
        if self._unigram_p is None:
            total = sum(s.successes for s in self.unigrams.values())
            self._unigram_p = {t: s.successes / total for t, s in self.unigrams.items() if s.successes > 0}
        return self._unigram_p

    def _called_probabilities(self) -> dict[str, float]:
        if self._called_p is None:
            total = sum(s.count for s in self.unigrams.values())
            self._called_p = {t: s.count / total for t, s in self.unigrams.items() if s.count > 0}
        return self._called_p

    def top_sequences(self, tool: str | None = None, limit: int = 10) -> list[NextTool]:
        """The most frequent successful n-grams (optionally those containing `tool`): counted where the
        prefix's last call worked, so a wrong pick the agent corrected (A failed, then B) is no sequence, and
        listed where their own last step worked at least once."""
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
            for prefix in list(self.table)
            if not prefix[-1].endswith(FAILED)  # the steps after a failed call: taken off below
            for nxt, s in self._after_worked(prefix).items()
            if s.count >= self.min_count and s.success_rate > 0 and (tool is None or tool == nxt or tool in prefix)
        ]
        rows.sort(key=lambda r: (r.prefix, r.tool))  # ties in one order, whatever order the n-grams are stored in
        rows.sort(key=lambda r: (r.count * r.success_rate, r.mean_reward), reverse=True)  # stable
        return rows[:limit]

    def state_dict(self) -> dict[str, Any]:
        """Columnar (interned tool names, numpy columns; `packed`): a year of n-grams packs and loads
        without a Python object an n-gram, so a snapshot fits in the time a client gives a stopping server."""
        if self._cold is not None:
            self._cold.flush()
        head = {"schema": self.SCHEMA, "max_n": self.max_n, "min_count": self.min_count}
        return head | packed(self._table, self._cold, self.max_n - 1) | packed_unigrams(self.unigrams)

    def load_state(self, state: dict[str, Any]) -> None:
        """Schemas 1 and 2 kept no unigrams: they are rebuilt from the bigrams (each tool's steps that
        had a previous tool; a session's first steps were not kept)."""
        schema = state["schema"]
        if schema not in (1, 2, self.SCHEMA):
            raise ValueError(f"sequence state schema {schema} is not {self.SCHEMA}")
        self.__init__(state["max_n"], state["min_count"])  # type: ignore[misc]  # reset to the loaded size: __init__ sets every field
        if schema == 1:  # rows of [prefix, tool, count, reward_sum, successes]
            for prefix, tool, count, reward_sum, successes in state["ngrams"]:
                self._table.setdefault(tuple(prefix), {})[tool] = NgramStats(count, reward_sum, successes)
                self._size += 1
                if len(prefix) == 1:
                    self._count_unigram(tool, count, reward_sum, successes)
            return
        self.unigrams = unpacked_unigrams(state) if schema == self.SCHEMA else unigrams_from_bigram_columns(state)
        self._size = len(state["tool"])
        if NgramColumns.fits(len(state["names"]), self.max_n - 1):
            self._cold = NgramColumns(state["names"], self.max_n - 1, state)
        else:
            self._table = unpacked(state)


def _level(worked: dict[str, int]) -> tuple[float, dict[str, float]]:
    """A seen prefix's back-off weight (how often something new followed it) and each tool's own share,
    from the tools that worked after it and how often."""
    total, types = sum(worked.values()), len(worked)
    return types / (total + types), {tool: count / (total + types) for tool, count in worked.items()}


def _worked(nexts: dict[str, NgramStats]) -> dict[str, int]:
    """The tools of `nexts` that worked, and how often."""
    return {tool: s.successes for tool, s in nexts.items() if s.successes > 0}
