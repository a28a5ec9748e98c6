"""The zero-shot prior as the server ranks before anything is learned: is the right tool first?

`Features.prior` of toolwise's own learner (the cosine and BM25 over `tool_document`, the caution of the tools
the annotations say change things) ranked over each whole catalogue: bench/everyday.py's 36 requests over the
README example's 14 tools (the real servers started to list them, annotations included) and the vendored public
sets (bench/adapter.py's loading: BFCL live, BFCL multi-turn, NESTFUL, τ-bench airline; no annotations). The same
numbers the sessions of issue 38 computed with throwaway scripts; a change to the text prior is measured against
the code before with `PYTHONPATH` at each one's `src` (a few seconds of CPU each).

    python bench/prior_top1.py [--sets bfcl_live bfcl_multi_turn nestful tau_airline] [--misses]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import mcp_types as types
import numpy as np
from adapter import everyday_tools, requests_of  # bench/adapter.py

from toolwise.learning.core import tool_doc
from toolwise.learning.embedding import load_embedder
from toolwise.rl.embedding import Embedder
from toolwise.rl.features import Features
from toolwise.rl.sequences import SequenceModel
from toolwise.rl.toolindex import ToolIndex

HERE = Path(__file__).resolve().parent
SETS = ("bfcl_live", "bfcl_multi_turn", "nestful", "tau_airline")
Catalogue = tuple[list[types.Tool], list[str], list[list[int]]]


def public(name: str) -> Catalogue:
    """A vendored set's tools (no annotations) and its requests with the indices of their right tools."""
    path = HERE / "data" / name
    raw = [json.loads(line) for line in (path / "tools.jsonl").read_text().splitlines()]
    tools = [
        types.Tool(name=t["name"], description=t.get("description") or "", input_schema=t.get("parameters") or {})
        for t in raw
    ]
    queries, right = requests_of(path, {t["name"]: i for i, t in enumerate(raw)})
    return tools, queries, right


def top1(embedder: Embedder, catalogue: Catalogue) -> tuple[int, list[str]]:
    """How many requests get a right tool first from the prior, and the misses ('request' → tool)."""
    tools, queries, right = catalogue
    index = ToolIndex(embedder)
    index.set_tools([tool_doc(t) for t in tools])
    features = Features(index, SequenceModel())
    position = [index.tools.get(t.name) for t in tools]  # the index's id of each tool
    hits, misses = 0, []
    for query, tools_right in zip(queries, right, strict=True):
        first = int(np.argmax(features.prior(query, None)))
        if first in {position[i] for i in tools_right}:
            hits += 1
        else:
            misses.append(f"{query!r} → {index.tools.names[first]}")
    return hits, misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="*", default=list(SETS))
    parser.add_argument("--misses", action="store_true", help="print everyday's misses")
    args = parser.parse_args()
    catalogues = {"everyday": asyncio.run(everyday_tools()), **{name: public(name) for name in args.sets}}
    embedder = load_embedder("wordllama")
    assert embedder is not None
    started = time.process_time()
    print("| set | tools | requests | prior top-1 |\n|---|---:|---:|---:|")
    for name, catalogue in catalogues.items():
        hits, misses = top1(embedder, catalogue)
        requests = len(catalogue[1])
        print(f"| {name} | {len(catalogue[0])} | {requests} | {100 * hits / requests:.1f}% ({hits}) |")
        if args.misses and name == "everyday":
            print("\n".join(f"  miss: {m}" for m in misses))
    print(f"\n{time.process_time() - started:.1f} s of CPU (the catalogues loaded)")


if __name__ == "__main__":
    main()
