"""A run of steps counted at once (`observe_batch`), over the columns of `ngram_columns.py`: the same
counts and sums as `NgramCounts.observe_step` one step at a time, for a replay's batches."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.ngram_columns import NgramColumns
from toolwise.rl.ngram_counts import NgramCounts
from toolwise.rl.ngrams import NgramStats, failed


class BatchCounts(NgramCounts):
    """`NgramCounts` that also counts a run of steps at once."""

    def observe_batch(
        self,
        previous: Sequence[str | None],
        tools: Sequence[str],
        histories: Sequence[Sequence[str]] | None,
        rewards: NDArray[np.float64],
        worked: NDArray[np.bool_],
        after_failure: NDArray[np.bool_] | None = None,
        *,
        look_up: bool = True,
    ) -> NDArray[np.float64]:
        """A run of steps at once, over columns: each step's `follow_score(previous[i], tools[i])`
        before it (−1 where None or `previous[i]` is None; all −1 without `look_up`, for a caller that does
        not read it), then, with `histories`, `observe_step` of each (the same counts and sums as one step
        at a time, without an object an n-gram), with `after_failure[i]` where given."""
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
        looked = np.array([i for i, p in enumerate(previous) if p is not None and look_up], dtype=np.int64)
        look_prefix = np.full((len(looked), width), -1, dtype=np.int32)
        look_prefix[:, 0] = [ids[p] for p in previous if p is not None and look_up]
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
        if len(looked):
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
        columns: NgramColumns,
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
    ) -> NgramColumns | None:
        """Every n-gram in the columns (the prefixes taken into dicts put back), with room for the
        batch's names; None if they do not fit."""
        width = self.max_n - 1
        if self._cold is None:
            empty = {k: np.zeros((0, width) if k == "prefix" else 0) for k in NgramColumns.COLUMNS}
            self._cold = NgramColumns([], width, empty)
        cold = self._cold
        names = dict.fromkeys(tools)  # in order of appearance: the same ids whatever the hash seed
        names.update(dict.fromkeys(p for p in previous if p is not None))
        names.update(dict.fromkeys(t for history in histories or () for t in history))
        names.update(dict.fromkeys(marked))
        names.update(dict.fromkeys(t for prefix, nexts in self._table.items() for t in (*prefix, *nexts)))
        missing = [name for name in names if name not in cold.ids]
        if not NgramColumns.fits(len(cold.ids) + len(missing), width):
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
