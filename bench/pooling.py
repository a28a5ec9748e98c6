"""Catalogue-aware pooling of WordLlama's token vectors, zero-shot: weight the words that tell a catalogue's
tools apart, embed a tool's fields apart, or score against the catalogue's centroid?

WordLlama embeds a text as the mean of its token vectors. Each variant below changes that mean (or the
cosine after it) using only the catalogue itself, nothing trained:

- `idf`: each token's vector weighted by its smooth idf over the catalogue's tool documents
  (1 + ln((N + 1) / (df + 1))), so words every tool shares ("git", "repository", "commit") count less;
  on the documents, on the requests, or both (a request's token no document holds: the largest idf, or 1);
- `sif`: the weight a / (a + p(token)), p the token's share of the catalogue's document tokens (SIF,
  Arora et al. 2017), or of a frequency guessed from the token's rank in the tokenizer (Zipf: merges
  come in order of frequency);
- `fields`: the name's words, the description's first sentence and the rest (parameters) pooled with
  their own weights, or the cosine with the name alone mixed with the document's;
- `centroid`: cos(q, d − m), m the mean of the documents' unit vectors (or q − m too), and SIF's
  removal of the documents' first principal component.

Every variant on bench/everyday.py's 36 requests over the README example's 14 tools (the real servers
started to list them) and on the vendored public sets (bench/adapter.py's loading: BFCL live, BFCL
multi-turn, NESTFUL, τ-bench airline), top-1 of the cosine alone and of the prior as `ToolIndex.scores`
combines it ((cosine + 0.25 BM25) / 1.25), beside BM25 alone, all in the same run.

    python bench/pooling.py [--sets bfcl_live bfcl_multi_turn nestful tau_airline]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from adapter import everyday_tools, requests_of, top1  # bench/adapter.py
from numpy.typing import NDArray

from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.rl.embedding import name_words
from toolwise.rl.lexical import LexicalIndex

HERE = Path(__file__).resolve().parent
SETS = ("bfcl_live", "bfcl_multi_turn", "nestful", "tau_airline")
WEIGHT = 0.25  # LearnerConfig.lexical_weight
Array = NDArray[np.float64]
Bag = tuple[NDArray[np.int64], Array]  # a text's distinct token ids and their counts
_SENTENCE = re.compile(r"(?<=[.!?])\s")


@dataclass(frozen=True)
class Tool:
    name: str
    title: str | None
    description: str | None
    schema: dict[str, Any] | None

    @property
    def document(self) -> str:
        return tool_document(self.name, self.title, self.description, self.schema)

    def fields(self) -> tuple[str, str, str]:
        """The name's words, the description's first sentence (with the title), and the rest of the document."""
        text = " ".join(p for p in (self.title or "", self.description or "") if p)
        first, *rest = _SENTENCE.split(text, maxsplit=1)
        params = tool_document("x", None, None, self.schema)[len("x.") :]
        return f"{name_words(self.name)}.", first, " ".join([*rest, params]).strip()


@dataclass
class Set:
    name: str
    tools: list[Tool]
    queries: list[str]
    right: list[list[int]]


def load(name: str) -> Set:
    """A vendored set as bench/adapter.py's `load` reads it, keeping each tool's fields."""
    path = HERE / "data" / name
    raw = [json.loads(line) for line in (path / "tools.jsonl").read_text().splitlines()]
    tools = [Tool(t["name"], None, t.get("description"), t.get("parameters")) for t in raw]
    queries, right = requests_of(path, {t.name: i for i, t in enumerate(tools)})
    return Set(name, tools, queries, right)


async def everyday_set() -> Set:
    """bench/everyday.py's requests over the tools the example's real servers list."""
    listed, queries, right = await everyday_tools()
    return Set("everyday", [Tool(t.name, t.title, t.description, t.input_schema) for t in listed], queries, right)


class Pooler:
    """Token bags of texts and their weighted means of WordLlama's token vectors."""

    def __init__(self, embedder: WordLlamaEmbedder) -> None:
        self.table = embedder.model.embedding.astype(np.float64)
        self.tokenizer = embedder.model.tokenizer

    def bags(self, texts: list[str]) -> list[Bag]:
        out = []
        for enc in self.tokenizer.encode_batch(texts, add_special_tokens=False):
            ids = np.array([t for t, keep in zip(enc.ids, enc.attention_mask, strict=True) if keep], dtype=np.int64)
            u, c = np.unique(ids, return_counts=True)
            out.append((u, c.astype(np.float64)))
        return out

    def sums(self, bags: list[Bag], weight: Array | None = None) -> Array:
        """Σ count · weight · vector of each bag (not normalised)."""
        out = np.zeros((len(bags), self.table.shape[1]))
        for row, (ids, counts) in enumerate(bags):
            if len(ids):
                w = counts if weight is None else counts * weight[ids]
                out[row] = w @ self.table[ids]
        return out


def unit(x: Array) -> Array:
    out: Array = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    return out


@dataclass
class Prepared:
    """One set's bags and statistics, what every variant reads."""

    s: Set
    docs: list[Bag]
    queries: list[Bag]
    fields: list[list[Bag]]  # name, first sentence, rest: one list of bags each
    bm25: Array
    vocab: int

    def df(self) -> Array:
        out = np.zeros(self.vocab)
        for ids, _ in self.docs:
            out[ids] += 1
        return out

    def freq(self) -> Array:
        out = np.zeros(self.vocab)
        for ids, counts in self.docs:
            out[ids] += counts
        share: Array = out / max(float(out.sum()), 1.0)
        return share


def prepare(s: Set, pooler: Pooler) -> Prepared:
    fields = list(zip(*(t.fields() for t in s.tools), strict=True))
    documents = [t.document for t in s.tools]
    lexical = LexicalIndex(documents)
    bm25 = np.stack([lexical.scores(q) for q in s.queries])
    return Prepared(
        s,
        pooler.bags(documents),
        pooler.bags(s.queries),
        [pooler.bags(list(f)) for f in fields],
        bm25,
        pooler.table.shape[0],
    )


Variant = Callable[[Prepared, Pooler], Array]  # the cosine of each request with each tool


def weighted(doc_side: bool, query_side: bool, weights: Callable[[Prepared], Array], unknown: str = "max") -> Variant:
    """Cosine of weighted means: `weights(p)` per token id, on the documents' side, the requests' or both;
    `unknown`: what a request's token no document holds weighs (`max`: as weights gives it, `one`: 1)."""

    def run(p: Prepared, pooler: Pooler) -> Array:
        w = weights(p)
        wq = w.copy()
        if unknown == "one":
            wq[p.df() == 0] = 1.0
        d = unit(pooler.sums(p.docs, w if doc_side else None))
        q = unit(pooler.sums(p.queries, wq if query_side else None))
        out: Array = q @ d.T
        return out

    return run


def idf(p: Prepared) -> Array:
    n = len(p.docs)
    out: Array = 1.0 + np.log((n + 1) / (p.df() + 1))
    return out


def sif(a: float) -> Callable[[Prepared], Array]:
    def weights(p: Prepared) -> Array:
        out: Array = a / (a + p.freq())
        return out

    return weights


def zipf(a: float) -> Callable[[Prepared], Array]:
    """SIF with p guessed from the token id's rank (byte-level BPE: merges in order of frequency)."""

    def weights(p: Prepared) -> Array:
        rank = np.arange(p.vocab, dtype=np.float64) + 10.0
        prob = 1.0 / (rank * np.log(1.78 * p.vocab))
        out: Array = a / (a + prob)
        return out

    return weights


def fields_pooled(name: float, first: float, rest: float, w: Callable[[Prepared], Array] | None = None) -> Variant:
    """The document as name · Σname + first · Σfirst sentence + rest · Σrest (its tokens weighted `w`, if
    given); the request's plain mean."""

    def run(p: Prepared, pooler: Pooler) -> Array:
        weight = None if w is None else w(p)
        parts = [pooler.sums(bags, weight) for bags in p.fields]
        d = unit(name * parts[0] + first * parts[1] + rest * parts[2])
        q = unit(pooler.sums(p.queries))
        out: Array = q @ d.T
        return out

    return run


def name_mix(alpha: float) -> Variant:
    """alpha · cos(q, the name's words) + (1 − alpha) · cos(q, the whole document)."""

    def run(p: Prepared, pooler: Pooler) -> Array:
        q = unit(pooler.sums(p.queries))
        out: Array = alpha * q @ unit(pooler.sums(p.fields[0])).T + (1 - alpha) * q @ unit(pooler.sums(p.docs)).T
        return out

    return run


def centroid(both: bool) -> Variant:
    def run(p: Prepared, pooler: Pooler) -> Array:
        d = unit(pooler.sums(p.docs))
        m = d.mean(axis=0)
        q = unit(pooler.sums(p.queries))
        out: Array = unit(q - m if both else q) @ unit(d - m).T
        return out

    return run


def common_component(w: Callable[[Prepared], Array] | None = None) -> Variant:
    """SIF's second step: the documents' first principal direction removed from every vector (the
    documents' tokens weighted `w` first, if given)."""

    def run(p: Prepared, pooler: Pooler) -> Array:
        d = unit(pooler.sums(p.docs, None if w is None else w(p)))
        u = np.linalg.svd(d, full_matrices=False)[2][0]
        q = unit(pooler.sums(p.queries))
        out: Array = unit(q - np.outer(q @ u, u)) @ unit(d - np.outer(d @ u, u)).T
        return out

    return run


VARIANTS: dict[str, Variant] = {
    "cosine (today)": weighted(False, False, idf),
    "idf docs": weighted(True, False, idf),
    "idf requests": weighted(False, True, idf),
    "idf both": weighted(True, True, idf),
    "idf both, unknown 1": weighted(True, True, idf, "one"),
    "sif 1e-3 docs": weighted(True, False, sif(1e-3)),
    "sif 3e-3 docs": weighted(True, False, sif(3e-3)),
    "sif 1e-3 requests": weighted(False, True, sif(1e-3)),
    "sif 1e-3 both": weighted(True, True, sif(1e-3)),
    "sif 1e-2 both": weighted(True, True, sif(1e-2)),
    "sif 1e-3 docs + common component": common_component(sif(1e-3)),
    "zipf 1e-4 both": weighted(True, True, zipf(1e-4)),
    "zipf 1e-5 both": weighted(True, True, zipf(1e-5)),
    "fields 2·name 2·first": fields_pooled(2, 2, 1),
    "fields 1·name 2·first": fields_pooled(1, 2, 1),
    "fields 2·name 2·first, sif 1e-3": fields_pooled(2, 2, 1, sif(1e-3)),
    "fields name + first only, sif 1e-3": fields_pooled(1, 1, 0, sif(1e-3)),
    "name mix 0.25": name_mix(0.25),
    "name mix 0.5": name_mix(0.5),
    "centroid docs": centroid(False),
    "centroid both": centroid(True),
    "common component": common_component(),
}


def measure(p: Prepared, cos: Array) -> tuple[float, float]:
    prior = (np.clip(cos, 0, 1) + WEIGHT * p.bm25) / (1 + WEIGHT)
    return top1(cos, p.s.right), top1(prior, p.s.right)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=[s for s in SETS if (HERE / "data" / s).exists()])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    pooler = Pooler(embedder)
    sets = [asyncio.run(everyday_set()), *(load(n) for n in args.sets)]
    prepared = [prepare(s, pooler) for s in sets]
    first = prepared[0]
    same = np.abs(unit(pooler.sums(first.docs)) - embedder.embed([t.document for t in first.s.tools])).max()
    assert same < 1e-5, f"the bags' plain mean is not WordLlama's embedding (max difference {same})"
    head = " | ".join(f"{p.s.name} ({len(p.s.queries)} / {len(p.s.tools)})" for p in prepared)
    print(f"Zero-shot top-1, cosine / prior ((cosine + 0.25 BM25) / 1.25), requests / tools:\n\n| variant | {head} |")
    print("|---|" + "---:|" * len(prepared))
    print("| BM25 | " + " | ".join(f"{top1(p.bm25, p.s.right):.1%}" for p in prepared) + " |")
    for label in args.variants:
        cells = [measure(p, VARIANTS[label](p, pooler)) for p in prepared]
        print(f"| {label} | " + " | ".join(f"{c:.1%} / {pr:.1%}" for c, pr in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
