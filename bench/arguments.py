"""Argument suggestions on real calls: how often the value toolwise suggests for an argument is the
value the successful call used, next to "the most frequent value of that tool's argument so far".

Each set's calls are replayed in order (BFCL live: its requests shuffled by the seed; BFCL multi-turn:
conversation after conversation, each call with its turn's user text); before a call, each method
suggests a value for every argument the call sets, from the calls before it only; then the call is
learned. toolwise's suggestions are `rl/arguments.py`'s (the memory `recommend_tool` reads, the
request embedded by the prior's WordLlama model), as recommend_tool serves them with store_arguments.

    python bench/arguments.py [--seed 0]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.arguments import ArgumentMemory

HERE = Path(__file__).resolve().parent


def calls_of(name: str, seed: int) -> list[tuple[str, str, dict[str, Any]]]:
    """(text, tool, arguments) in replay order."""
    path = HERE / "data" / name
    if name == "bfcl_live":
        rows = [json.loads(line) for line in (path / "queries.jsonl").read_text().splitlines()]
        rows = [rows[i] for i in np.random.default_rng(seed).permutation(len(rows))]
        return [(r["query"], c["tool"], c["arguments"]) for r in rows for c in r["calls"]]
    chains = [json.loads(line) for line in (path / "chains.jsonl").read_text().splitlines()]
    chains = [chains[i] for i in np.random.default_rng(seed).permutation(len(chains))]
    return [(s["text"], s["tool"], s["arguments"]) for c in chains for s in c["steps"]]


def kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, list):
        return "list"
    return "string" if isinstance(value, str) else "other"


def run(name: str, seed: int, embedder: WordLlamaEmbedder) -> str:
    calls = calls_of(name, seed)
    vectors = embedder.embed(list(dict.fromkeys(text for text, _, _ in calls)))
    index = {text: i for i, text in enumerate(dict.fromkeys(text for text, _, _ in calls))}
    memory = ArgumentMemory()
    frequent: defaultdict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    tally: defaultdict[str, Counter[str]] = defaultdict(Counter)  # kind → counts of each outcome
    for text, tool, arguments in calls:
        vector = vectors[index[text]]
        ours = {s.name: json.dumps(s.value, sort_keys=True) for s in memory.suggest(tool, vector)}
        for argument, value in arguments.items():
            truth, k = json.dumps(value, sort_keys=True), kind(value)
            counts = frequent[(tool, argument)]
            reference = counts.most_common(1)[0][0] if counts else None
            tally[k]["arguments"] += 1
            tally[k]["toolwise"] += ours.get(argument) == truth
            tally[k]["reference"] += reference == truth
            tally[k]["toolwise offered"] += argument in ours
            tally[k]["reference offered"] += reference is not None
            counts[truth] += 1
        memory.add(tool, vector, arguments)
    total = sum((t for t in tally.values()), Counter())
    lines = [
        f"{name}: {len(calls)} calls, {total['arguments']} argument values, seed {seed}",
        "| values | n | toolwise: right (offered) | most frequent so far: right (offered) |",
        "|---|---|---|---|",
    ]
    for label, t in [*sorted(tally.items()), ("all", total)]:
        n = t["arguments"]
        lines.append(
            f"| {label} | {n} | {t['toolwise'] / n:.1%} ({t['toolwise offered'] / n:.0%}) "
            f"| {t['reference'] / n:.1%} ({t['reference offered'] / n:.0%}) |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", nargs="+", default=["bfcl_live", "bfcl_multi_turn"])
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    for name in args.data:
        print(run(name, args.seed, embedder), end="\n\n")


if __name__ == "__main__":
    main()
