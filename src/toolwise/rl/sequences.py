"""N-gram model of tool sequences: which tool tends to follow the last one or two, and how well it goes.

What comes next is an interpolated Witten-Bell estimate over the steps that worked (Witten & Bell
1991; Chen & Goodman 1998, §2.4): P(w | h) = (c(h, w) + T(h)·P(w | h⁻)) / (c(h) + T(h)), where h⁻ drops
the oldest tool of h, c counts the steps that worked, T(h) is how many distinct tools worked after h,
and the recursion ends at the unigram c(w) / N. A prefix seen once still answers, an unseen one backs
off to the shorter one, and a session's first step (no prefix) gets the tools that work most often.
Witten-Bell needs only the counts after each prefix, which the table already keeps.

The next call as the agent will make it (`recommend_next`) is the same estimate over every call, whether
it worked or not: after a failed call agents mostly retry it, which a model of the calls that worked
cannot predict. A failed last call is its own context: the steps that followed one are also counted
after the prefix with that tool marked failed (`failed`); "B worked" is B's counts less those, and
both back off to "B" (every call after B) before the calls at large. Each suggestion carries P(the
agent calls it) and P(it works) there.
"""

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
    p_agent: float = 0.0  # P(the agent calls it next), over all calls (`recommend_next`)
    p_works: float = 0.0  # P(that call works), its success counts there shrunk to the tool's own rate


FAILED = "\x00failed"  # marks a prefix's last tool as a call that failed (no MCP tool name holds a NUL)
WORKS_PRIOR = 2.0  # pseudo-calls at the tool's own success rate in `p_works`


def failed(tool: str) -> str:
    """The name a failed call of `tool` has as the last tool of a prefix."""
    return tool + FAILED


class SequenceModel:
    """Counts every n-gram (n = 2..max_n) of session tool sequences, keyed by prefix then next tool:
    recommending is one dict lookup per prefix length, longest first (back-off)."""

    SCHEMA = 3  # 1: a list of rows; 2: no unigrams (both still loaded)

    def __init__(self, max_n: int = 3, min_count: int = 2) -> None:
        if max_n < 2 or min_count < 1:
            raise ValueError(f"need max_n ≥ 2 and min_count ≥ 1, got {max_n}, {min_count}")
        self.max_n, self.min_count = max_n, min_count
        self._table: dict[tuple[str, ...], dict[str, NgramStats]] = {}
        self._cold: _Columns | None = None  # a loaded state's prefixes not used yet
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

    def _worked_after(self, prefix: tuple[str, ...]) -> dict[str, int]:
        """The tools that worked after `prefix` and how often, read where they are: a prefix still in the
        loaded columns is read there, not taken into a dict (a run reads many, and puts them back after)."""
        found = self._table.get(prefix)
        if found is not None:
            return {tool: s.successes for tool, s in found.items() if s.successes > 0}
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

    def observe_batch(
        self,
        previous: Sequence[str | None],
        tools: Sequence[str],
        histories: Sequence[Sequence[str]] | None,
        rewards: NDArray[np.float64],
        worked: NDArray[np.bool_],
        after_failure: NDArray[np.bool_] | None = None,
    ) -> NDArray[np.float64]:
        """A run of steps at once, over columns: each step's `follow_score(previous[i], tools[i])`
        before it (−1 where None or `previous[i]` is None), then, with `histories`, `observe_step` of
        each (the same counts and sums as one step at a time, without an object an n-gram), with
        `after_failure[i]` where given."""
        width = self.max_n - 1
        flags = np.zeros(len(tools), dtype=bool) if after_failure is None else np.asarray(after_failure, dtype=bool)
        marked = [failed(h[-1]) for h, f in zip(histories or (), flags.tolist(), strict=False) if f and h]
        columns = self._columns_for_batch(tools, previous, histories, marked)
        if columns is None:  # more tool names than the keys hold: one step at a time
            return self._observe_steps(previous, tools, histories, rewards, worked, flags)
        ids = columns.ids  # every name of the batch is interned by now
        tool_ids = np.array([ids[t] for t in tools], dtype=np.int32)
        if histories is not None:
            self._count_unigrams(columns.names, tool_ids, rewards, worked)
        looked = np.array([i for i, p in enumerate(previous) if p is not None], dtype=np.int64)
        look_prefix = np.full((len(looked), width), -1, dtype=np.int32)
        look_prefix[:, 0] = [ids[p] for p in previous if p is not None]
        look_keys = columns._keys(look_prefix, tool_ids[looked])
        # last[k - 1, i]: the id of the k-th tool back in step i's history (−1: the history is shorter)
        last = np.full((width, len(tools)), -1, dtype=np.int32)
        for k in range(1, width + 1):
            last[k - 1] = [ids[h[-k]] if len(h) >= k else -1 for h in histories or ()] if histories else -1
        seen_steps, seen_prefixes = [], []
        for length in range(1, width + 1):  # a step's n-grams: its tool after each suffix of its history
            at = np.flatnonzero(last[length - 1] >= 0)
            prefix = np.full((len(at), width), -1, dtype=np.int32)
            for j in range(length):
                prefix[:, j] = last[length - 1 - j, at]
            seen_steps.append(at)
            seen_prefixes.append(prefix)
        seen_step, seen_prefix = np.concatenate(seen_steps), np.concatenate(seen_prefixes)
        seen_keys = columns._keys(seen_prefix, tool_ids[seen_step])
        seen_worked = worked[seen_step].astype(np.int64)
        count, successes, new = columns.count_batch(
            look_keys, seen_keys, seen_prefix, tool_ids[seen_step], rewards[seen_step], seen_worked
        )
        earlier_count, earlier_successes = _earlier(look_keys, looked, seen_keys, seen_step, seen_worked)
        count, successes = count + earlier_count, successes + earlier_successes
        self._size += new
        if marked:
            self._size += self._count_after_failures(
                columns, seen_step[flags[seen_step]], seen_prefix[flags[seen_step]], tool_ids, rewards, worked
            )
        follow = np.full(len(tools), -1.0)
        enough = count >= self.min_count
        rate = successes[enough] / count[enough]
        follow[looked[enough]] = rate * count[enough] / (count[enough] + 1)
        return follow

    @staticmethod
    def _count_after_failures(
        columns: _Columns,
        step: NDArray[np.int64],
        prefix: NDArray[np.int32],
        tool_ids: NDArray[np.int32],
        rewards: NDArray[np.float64],
        worked: NDArray[np.bool_],
    ) -> int:
        """The n-grams of steps that followed a failed call, again under their prefixes with the last
        tool marked failed (`_prefixes`); returns how many are new."""
        rows = np.arange(len(prefix))
        last = (prefix >= 0).sum(axis=1) - 1  # where each prefix holds its most recent tool
        prefix = prefix.copy()
        prefix[rows, last] = [columns.ids[failed(columns.names[i])] for i in prefix[rows, last].tolist()]
        keys = columns._keys(prefix, tool_ids[step])
        return columns.add(keys, prefix, tool_ids[step], rewards[step], worked[step].astype(np.int64))

    def _count_unigrams(
        self, names: list[str], tool_ids: NDArray[np.int32], rewards: NDArray[np.float64], worked: NDArray[np.bool_]
    ) -> None:
        """A batch's unigrams over arrays; each reward sum added in order, as one step at a time adds it."""
        used, where = np.unique(tool_ids, return_inverse=True)
        stats = [self.unigrams.setdefault(names[tool], NgramStats()) for tool in used.tolist()]
        sums = np.array([s.reward_sum for s in stats])
        np.add.at(sums, where, rewards)
        counts = np.bincount(where, minlength=len(used)).tolist()
        wins = np.bincount(where, weights=worked, minlength=len(used)).tolist()
        for s, count, reward_sum, successes in zip(stats, counts, sums.tolist(), wins, strict=True):
            s.count, s.reward_sum, s.successes = s.count + count, reward_sum, s.successes + round(successes)
        self._unigram_p = self._called_p = None

    def _columns_for_batch(
        self,
        tools: Sequence[str],
        previous: Sequence[str | None],
        histories: Sequence[Sequence[str]] | None,
        marked: Sequence[str] = (),
    ) -> _Columns | None:
        """Every n-gram in the columns (the prefixes taken into dicts put back), with room for the
        batch's names; None if they do not fit."""
        width = self.max_n - 1
        if self._cold is None:
            empty = {k: np.zeros((0, width) if k == "prefix" else 0) for k in _Columns.COLUMNS}
            self._cold = _Columns([], width, empty)
        cold = self._cold
        names = dict.fromkeys(tools)  # in order of appearance: the same ids whatever the hash seed
        names.update(dict.fromkeys(p for p in previous if p is not None))
        names.update(dict.fromkeys(t for history in histories or () for t in history))
        names.update(dict.fromkeys(marked))
        names.update(dict.fromkeys(t for prefix, nexts in self._table.items() for t in (*prefix, *nexts)))
        missing = [name for name in names if name not in cold.ids]
        if not _Columns.fits(len(cold.ids) + len(missing), width):
            return None
        for name in missing:
            cold.intern(name)
        for prefix, nexts in self._table.items():
            cold.put(prefix, nexts)
        self._table.clear()
        return cold

    def _observe_steps(
        self,
        previous: Sequence[str | None],
        tools: Sequence[str],
        histories: Sequence[Sequence[str]] | None,
        rewards: NDArray[np.float64],
        worked: NDArray[np.bool_],
        after_failure: NDArray[np.bool_],
    ) -> NDArray[np.float64]:
        follow = np.full(len(tools), -1.0)
        for i, (before, tool, reward, success, flag) in enumerate(
            zip(previous, tools, rewards.tolist(), worked.tolist(), after_failure.tolist(), strict=True)
        ):
            if before is not None and (score := self.follow_score(before, tool)) is not None:
                follow[i] = score
            if histories is not None:
                self.observe_step(histories[i], tool, reward, success, after_failure=flag)
        return follow

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
            if not worked:
                continue  # an unseen prefix: the shorter one's estimate stands
            total, types = sum(worked.values()), len(worked)
            keep = types / (total + types)  # the back-off weight: how often something new followed h
            levels.append((keep, {tool: count / (total + types) for tool, count in worked.items()}))
        return self._unigram_probabilities(), levels

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

    def _agent_contexts(self, history: Sequence[str], after_failure: bool) -> list[tuple[tuple[str, ...], bool]]:
        """The contexts of `agent_distribution`, shortest first, each a prefix of the table and whether it
        is read as the part of its counts that followed a call that worked (its counts less the marked
        prefix's). Once the last tool has been seen to fail, whether it failed is a context of its own
        either way, and back-off drops the oldest fact first: (A, B failed or worked) → (B failed or
        worked) → (B, every call) → every call. Before any failure of it, "it worked" adds nothing."""
        suffixes = [tuple(history[-length:]) for length in range(1, min(self.max_n - 1, len(history)) + 1)]
        if not suffixes or not self._nexts((failed(history[-1]),)):
            return [(prefix, False) for prefix in suffixes]  # no failure of it seen: all calls
        if after_failure:
            return [(suffixes[0], False)] + [((*prefix[:-1], failed(prefix[-1])), False) for prefix in suffixes]
        return [(suffixes[0], False)] + [(prefix, True) for prefix in suffixes]

    def _agent_counts(self, prefix: tuple[str, ...], worked_only: bool) -> dict[str, NgramStats]:
        nexts = self._nexts(prefix) or {}
        marked = self._nexts((*prefix[:-1], failed(prefix[-1]))) if worked_only else None
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

    def _agent_levels(
        self, history: Sequence[str], after_failure: bool
    ) -> list[tuple[tuple[str, ...], dict[str, NgramStats]]]:
        """Each context of `agent_distribution` (shortest first) with the calls counted after it."""
        return [(p, self._agent_counts(p, worked)) for p, worked in self._agent_contexts(history, after_failure)]

    def agent_distribution(self, history: Sequence[str], after_failure: bool = False) -> dict[str, float]:
        """P(the agent's next call | its last calls, and whether the last one failed): interpolated
        Witten-Bell over every call (see the module's docstring); sums to 1 over the tools ever called."""
        return self._agent_probabilities(self._agent_levels(history, after_failure))

    def _agent_probabilities(self, levels: list[tuple[tuple[str, ...], dict[str, NgramStats]]]) -> dict[str, float]:
        probability = dict(self._called_probabilities())
        for _, counts in levels:
            called = {t: s.count for t, s in counts.items() if s.count > 0}
            if not called:
                continue
            total, types = sum(called.values()), len(called)
            keep = types / (total + types)
            for tool in probability:
                probability[tool] *= keep
            for tool, count in called.items():
                probability[tool] = probability.get(tool, 0.0) + count / (total + types)
        return probability

    def recommend_next(
        self,
        recent_tools: Sequence[str],
        candidates: Iterable[str] | None = None,
        top_k: int = 5,
        *,
        after_failure: bool = False,
    ) -> list[NextTool]:
        """The `top_k` calls the agent most probably makes next (`agent_distribution`; a retry of a failed
        last call included) among `candidates`, each with P(it works) there and the longest context it
        was seen after (none: it is just often called) with its counts."""
        levels = self._agent_levels(recent_tools, after_failure)
        probability = self._agent_probabilities(levels)
        if candidates is not None:
            allowed = set(candidates)
            probability = {t: p for t, p in probability.items() if t in allowed}
        best = sorted(probability.items(), key=lambda item: (-item[1], item[0]))[:top_k]
        return [self._explain(levels, tool, p) for tool, p in best]

    def _explain(
        self, levels: list[tuple[tuple[str, ...], dict[str, NgramStats]]], tool: str, probability: float
    ) -> NextTool:
        own = self.unigrams[tool]
        base = (own.successes + 1) / (own.count + 2)  # the tool's own success rate, Laplace-smoothed
        for prefix, counts in reversed(levels):
            s = counts.get(tool)
            if s is not None and s.count:
                shown = tuple(t.removesuffix(FAILED) for t in prefix)
                steps = [*shown[:-1], shown[-1] + (" (failed)" if prefix[-1].endswith(FAILED) else "")]
                reason = f"follows {' → '.join(steps)} → {tool} ({s.count}×, {s.success_rate:.0%} success)"
                works = (s.successes + WORKS_PRIOR * base) / (s.count + WORKS_PRIOR)
                return NextTool(
                    tool, probability, s.count, s.success_rate, s.mean_reward, shown, reason, probability, works
                )
        reason = f"often called ({own.count}×, {own.success_rate:.0%} success), never yet after these tools"
        return NextTool(tool, probability, own.count, own.success_rate, own.mean_reward, (), reason, probability, base)

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
            if not prefix[-1].endswith(FAILED)  # the steps after a failed call, counted twice
            for nxt, s in nexts.items()
            if s.count >= self.min_count and (tool is None or tool == nxt or tool in prefix)
        ]
        rows.sort(key=lambda r: (r.count * r.success_rate, r.mean_reward), reverse=True)
        return rows[:limit]

    def state_dict(self) -> dict[str, Any]:
        """Columnar (interned tool names, numpy columns; `_packed`): a year of n-grams packs and loads
        in a fraction of a second, so a snapshot fits in the time a client gives a stopping server."""
        if self._cold is not None:
            self._cold.flush()
        head = {"schema": self.SCHEMA, "max_n": self.max_n, "min_count": self.min_count}
        return head | _packed(self._table, self._cold, self.max_n - 1) | _packed_unigrams(self.unigrams)

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
        self.unigrams = _unpacked_unigrams(state) if schema == self.SCHEMA else _unigrams_from_bigram_columns(state)
        self._size = len(state["tool"])
        if _Columns.fits(len(state["names"]), self.max_n - 1):
            self._cold = _Columns(state["names"], self.max_n - 1, state)
        else:
            self._table = _unpacked(state)


def _packed(table: dict[tuple[str, ...], dict[str, NgramStats]], cold: _Columns | None, width: int) -> dict[str, Any]:
    """The n-grams as columns over interned names: each row a prefix (ids, −1-padded to `width`), a
    next tool and its counts; a loaded state's rows of prefixes never used since come first, as they were."""
    names: dict[str, int] = dict(cold.ids) if cold is not None else {}
    prefix: list[int] = []
    tool: list[int] = []
    count: list[int] = []
    reward_sum: list[float] = []
    successes: list[int] = []
    for p, nexts in table.items():
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
    if cold is not None:
        unused = cold.unused()
        columns = {k: np.concatenate([cold.columns[k][unused], v]) for k, v in columns.items()}
    return {"names": list(names), **columns}


def _unpacked(state: dict[str, Any]) -> dict[tuple[str, ...], dict[str, NgramStats]]:
    """`_packed`'s columns as the table of n-grams (a state too wide for `_Columns`' keys)."""
    table: dict[tuple[str, ...], dict[str, NgramStats]] = {}
    names = state["names"]
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
    return table


def _packed_unigrams(unigrams: dict[str, NgramStats]) -> dict[str, Any]:
    kept = list(unigrams.values())
    return {
        "unigram_tools": list(unigrams),
        "unigram_count": np.array([u.count for u in kept], dtype=np.int64),
        "unigram_reward_sum": np.array([u.reward_sum for u in kept], dtype=np.float64),
        "unigram_successes": np.array([u.successes for u in kept], dtype=np.int64),
    }


def _unpacked_unigrams(state: dict[str, Any]) -> dict[str, NgramStats]:
    return {
        tool: NgramStats(count, reward_sum, successes)
        for tool, count, reward_sum, successes in zip(
            state["unigram_tools"],
            np.asarray(state["unigram_count"]).tolist(),
            np.asarray(state["unigram_reward_sum"]).tolist(),
            np.asarray(state["unigram_successes"]).tolist(),
            strict=True,
        )
    }


def _unigrams_from_bigram_columns(state: dict[str, Any]) -> dict[str, NgramStats]:
    """A schema-2 state's unigrams, rebuilt from its bigram rows."""
    bigram = (np.asarray(state["prefix"]).reshape(len(state["tool"]), -1)[:, 1:] < 0).all(axis=1)
    tools = np.asarray(state["tool"])[bigram]
    used, where = np.unique(tools, return_inverse=True)
    sums = {
        k: np.bincount(where, weights=np.asarray(state[k])[bigram].astype(np.float64), minlength=len(used))
        for k in ("count", "reward_sum", "successes")
    }
    return {
        state["names"][tool]: NgramStats(
            round(sums["count"][i]), float(sums["reward_sum"][i]), round(sums["successes"][i])
        )
        for i, tool in enumerate(used.tolist())
    }


DTYPES = {"prefix": np.int32, "tool": np.int32, "count": np.int64, "reward_sum": np.float64, "successes": np.int64}
KEY_BITS = 20  # bits of a tool id in an n-gram key: about a million tool names (fewer for longer prefixes)


class _Columns:
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
        ids = [self.ids.get(name) for name in prefix]
        if None in ids or len(ids) > self.width:
            return None
        key = int(self._prefix_keys(np.array([[*ids, *[-1] * (self.width - len(ids))]], dtype=np.int64))[0])
        group = int(np.searchsorted(self.prefixes, key))
        if group >= len(self.prefixes) or self.prefixes[group] != key or self.used[group]:
            return None
        return group

    def successes(self, prefix: tuple[str, ...]) -> dict[str, int] | None:
        """The prefix's tools that worked and how often, in `take`'s order, read in place (not taken)."""
        group = self._group(prefix)
        if group is None:
            return None
        rows = slice(self.starts[group], self.ends[group])
        names = self.names
        tools, successes = self.columns["tool"][rows].tolist(), self.columns["successes"][rows].tolist()
        return {names[t]: n for t, n in zip(tools, successes, strict=True) if n > 0}

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


def _earlier(
    look_keys: NDArray[np.int64],
    look_step: NDArray[np.int64],
    seen_keys: NDArray[np.int64],
    seen_step: NDArray[np.int64],
    seen_successes: NDArray[np.int64],
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """For each look-up (an n-gram key at a step), how often that n-gram was seen at earlier steps of
    the batch, and how often it worked: a prefix sum within each key, look-ups sorted before the
    step's own sightings."""
    keys = np.concatenate([seen_keys, look_keys])
    step = np.concatenate([seen_step, look_step])
    is_seen = np.concatenate([np.ones(len(seen_keys), np.int64), np.zeros(len(look_keys), np.int64)])
    worked = np.concatenate([seen_successes, np.zeros(len(look_keys), np.int64)])
    order = np.lexsort((is_seen, step, keys))
    sorted_keys = keys[order]
    first = np.searchsorted(sorted_keys, sorted_keys)  # each key's first position
    out = []
    for values in (is_seen, worked):
        ordered = values[order]
        running = np.cumsum(ordered)
        before_group = running[first] - ordered[first]
        inclusive = running - before_group
        result = np.empty(len(keys), np.int64)
        result[order] = inclusive
        out.append(result[len(seen_keys) :])
    return out[0], out[1]


def key_bits(width: int) -> int:
    """Bits of a tool id in an n-gram key of `width` prefix tools and the next tool (≤ 62 in all)."""
    return min(KEY_BITS, 62 // (width + 1))
