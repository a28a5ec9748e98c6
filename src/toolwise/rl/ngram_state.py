"""The n-gram model's state as columns (`NgramCounts.state_dict`, `load_state`): the n-grams over
interned names, the unigrams, and the unigrams an older schema did not keep, rebuilt."""

from __future__ import annotations

from typing import Any

import numpy as np

from toolwise.rl.ngram_columns import NgramColumns
from toolwise.rl.ngrams import NgramStats


def packed(
    table: dict[tuple[str, ...], dict[str, NgramStats]], cold: NgramColumns | None, width: int
) -> dict[str, Any]:
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


def unpacked(state: dict[str, Any]) -> dict[tuple[str, ...], dict[str, NgramStats]]:
    """`packed`'s columns as the table of n-grams (a state too wide for `NgramColumns`' keys)."""
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


def packed_unigrams(unigrams: dict[str, NgramStats]) -> dict[str, Any]:
    kept = list(unigrams.values())
    return {
        "unigram_tools": list(unigrams),
        "unigram_count": np.array([u.count for u in kept], dtype=np.int64),
        "unigram_reward_sum": np.array([u.reward_sum for u in kept], dtype=np.float64),
        "unigram_successes": np.array([u.successes for u in kept], dtype=np.int64),
    }


def unpacked_unigrams(state: dict[str, Any]) -> dict[str, NgramStats]:
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


def unigrams_from_bigram_columns(state: dict[str, Any]) -> dict[str, NgramStats]:
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
