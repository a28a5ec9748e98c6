"""A learned adapter on WordLlama's frozen embeddings, trained on some tool-use sets and measured on
the others: does it carry to a catalogue it never saw? (It did not: docs/benchmarks.md, "A learned
adapter"; nothing of it ships.)

Each set (bench/data/<set>/: tools.jsonl and queries.jsonl, or tau-bench's trajectories.jsonl) gives
(request, right tools) pairs over its own catalogue; the tool documents are toolwise's
(`tool_document`). Three forms, each trained with a softmax over the set's whole catalogue (the right
tools the target, temperature τ), Adam, and a pull towards no change; numpy only:

- `shared`: a 256×256 map W from the identity, relevance cos(W·q, W·d) (W on every embedding alike);
- `query`: the same on the request side only, cos(W·q, d);
- `weight`: each token's vector weighted exp(v·e_token) in the mean (v: 256 numbers, so the weight
  of a token no training text holds is learned too).

Leave-one-set-out: for each set, the adapter trained on the others and scored on it (top-1 of the
cosine, and of the prior as toolwise scores it: (cosine + 0.25 BM25) / 1.25), beside BM25 alone and
the raw cosine in the same run; each held-out adapter and one trained on every set also on
bench/everyday.py's 36 requests (never trained on) over the README example's 14 tools (the real
servers started to list them). Embeddings are cached in bench/out/ between runs.

    python bench/adapter.py [--sets bfcl_live bfcl_multi_turn nestful seal_tools tau_airline]
                            [--form shared|query|weight] [--epochs 2] [--decay 0.01] [--lr 0.002]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
import numpy as np
from numpy.typing import NDArray

from toolwise.config import AppConfig
from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.rl.lexical import LexicalIndex
from toolwise.server.app import Toolwise

HERE = Path(__file__).resolve().parent
Array = NDArray[np.float64]
Ints = NDArray[np.int64]
LICENSED = ("bfcl_live", "bfcl_multi_turn", "nestful", "seal_tools", "tau_airline")
CHUNK = 40_000  # token occurrences gathered at once (the weight form)


def empty() -> Array:
    return np.zeros((0, 0))


@dataclass
class Bags:
    """Each text's distinct token ids and counts, flattened in text order (`owner`: the text's row)."""

    tok: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    cnt: Array = field(default_factory=lambda: np.zeros(0))
    owner: Ints = field(default_factory=lambda: np.zeros(0, np.int64))
    n: int = 0

    def rows(self, idx: Ints) -> Bags:
        """The bags of texts `idx` (sorted), renumbered 0.."""
        keep = np.isin(self.owner, idx)
        remap = np.full(self.n, -1)
        remap[idx] = np.arange(len(idx))
        return Bags(self.tok[keep], self.cnt[keep], remap[self.owner[keep]], len(idx))


@dataclass
class Set:
    name: str
    documents: list[str]
    queries: list[str]
    right: list[list[int]]
    q: Array = field(default_factory=empty)  # unit query vectors
    d: Array = field(default_factory=empty)  # unit document vectors
    bm25: Array = field(default_factory=empty)  # BM25 of each query against each document, [0, 1]
    qbags: Bags = field(default_factory=Bags)
    dbags: Bags = field(default_factory=Bags)

    def target(self, idx: Ints) -> Array:
        out = np.zeros((len(idx), len(self.documents)))
        for row, i in enumerate(idx):
            out[row, self.right[i]] = 1.0 / len(self.right[i])
        return out


def load(name: str) -> Set:
    path = HERE / "data" / name
    tools = [json.loads(line) for line in (path / "tools.jsonl").read_text().splitlines()]
    docs = [tool_document(t["name"], None, t.get("description"), t.get("parameters")) for t in tools]
    queries, right = requests_of(path, {t["name"]: i for i, t in enumerate(tools)})
    return Set(name, docs, queries, right)


def requests_of(path: Path, index: dict[str, int]) -> tuple[list[str], list[list[int]]]:
    """A vendored set's requests and the indices of their right tools (requests with none listed left out)."""
    pairs: dict[str, set[int]] = {}
    if (path / "queries.jsonl").exists():
        for q in map(json.loads, (path / "queries.jsonl").read_text().splitlines()):
            pairs.setdefault(q["query"], set()).update(index[t] for t in q["tools"] if t in index)
    else:  # tau-bench: each user message and the tools called after it
        for run in map(json.loads, (path / "trajectories.jsonl").read_text().splitlines()):
            for step in run["steps"]:
                if step["text"] and step["tool"] in index:
                    pairs.setdefault(step["text"], set()).add(index[step["tool"]])
    kept = [(q, sorted(r)) for q, r in pairs.items() if r]
    return [q for q, _ in kept], [r for _, r in kept]


async def everyday_tools() -> tuple[list[types.Tool], list[str], list[list[int]]]:
    """The tools the README example's real servers list, and bench/everyday.py's requests with the indices
    of their right tools among them."""
    from everyday import EXAMPLE, REQUESTS

    servers = json.loads(EXAMPLE.read_text())["mcpServers"]
    for spec in servers.values():
        spec["command"] = shutil.which(spec["command"]) or str(Path(sys.executable).parent / spec["command"])
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"database_url": f"sqlite+aiosqlite:///{tmp}/everyday.db", "exposure": "search"}
        config = AppConfig.model_validate({"mcpServers": servers, "toolwise": settings})
        async with Toolwise(config) as app:
            tools = app.catalogue.tools()
    names = [t.name for t in tools]
    return tools, [r.query for r in REQUESTS], [[names.index(t) for t in r.right] for r in REQUESTS]


async def everyday_set() -> Set:
    """bench/everyday.py's requests over the tools the example's real servers list."""
    tools, queries, right = await everyday_tools()
    docs = [tool_document(t.name, t.title, t.description, t.input_schema) for t in tools]
    return Set("everyday", docs, queries, right)


def bags(texts: list[str], model: Any) -> Bags:
    tok, cnt, owner = [], [], []
    for i, enc in enumerate(model.tokenizer.encode_batch(texts, add_special_tokens=False)):
        ids = [t for t, keep in zip(enc.ids, enc.attention_mask, strict=True) if keep]
        u, c = np.unique(np.array(ids, dtype=np.int64), return_counts=True)
        tok.append(u)
        cnt.append(c.astype(np.float64))
        owner.append(np.full(len(u), i))
    return Bags(np.concatenate(tok), np.concatenate(cnt), np.concatenate(owner), len(texts))


def embed(sets: list[Set], embedder: WordLlamaEmbedder) -> None:
    for s in sets:
        s.q = embedder.embed(s.queries).astype(np.float64)
        s.d = embedder.embed(s.documents).astype(np.float64)
        lexical = LexicalIndex(s.documents)
        s.bm25 = np.stack([lexical.scores(q) for q in s.queries])
        s.qbags, s.dbags = bags(s.queries, embedder.model), bags(s.documents, embedder.model)


def unit(x: Array) -> tuple[Array, Array]:
    norm = np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-9)
    return x / norm, norm


def softmax_grads(a: Array, an: Array, b: Array, bn: Array, target: Array, tau: float) -> tuple[Array, Array]:
    """∂L/∂(unnormalised) rows of a and b, for L the mean cross-entropy of softmax(cos(a, b) / τ)."""
    logits = a @ b.T / tau
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    g = (p - target) / len(a) / tau
    da, db = g @ b, g.T @ a
    return (da - a * (da * a).sum(1, keepdims=True)) / an, (db - b * (db * b).sum(1, keepdims=True)) / bn


class Adam:
    def __init__(self, start: Array, lr: float) -> None:
        self.x, self.lr, self.t = start.copy(), lr, 0
        self.m, self.v = np.zeros_like(start), np.zeros_like(start)

    def step(self, grad: Array) -> None:
        self.t += 1
        self.m = 0.9 * self.m + 0.1 * grad
        self.v = 0.999 * self.v + 0.001 * grad**2
        self.x -= self.lr * (self.m / (1 - 0.9**self.t)) / (np.sqrt(self.v / (1 - 0.999**self.t)) + 1e-8)


def batches(sets: list[Set], rng: np.random.Generator, epochs: int) -> list[tuple[Set, Ints]]:
    """Batches of about 64 requests of one set each, shuffled, `epochs` times over."""
    one = [(s, i) for s in sets for i in np.array_split(np.arange(len(s.queries)), max(1, len(s.queries) // 64))]
    return [one[k] for _ in range(epochs) for k in rng.permutation(len(one))]


def train_map(sets: list[Set], form: str, epochs: int, tau: float, decay: float, lr: float, seed: int) -> Array:
    """W (`shared` or `query`)."""
    eye = np.eye(sets[0].d.shape[1])
    opt = Adam(eye, lr)
    for s, idx in batches(sets, np.random.default_rng(seed), epochs):
        q, d, w = s.q[idx], s.d, opt.x
        a, an = unit(q @ w.T)
        b, bn = unit(d @ w.T) if form == "shared" else (d, np.ones((len(d), 1)))
        da, db = softmax_grads(a, an, b, bn, s.target(idx), tau)
        opt.step(da.T @ q + (db.T @ d if form == "shared" else 0.0) + 2 * decay * (w - eye))
    return opt.x


def pool(b: Bags, table: Array, weight: Array) -> Array:
    """Σ count · weight · vector over each text's tokens (`weight`: one per vocabulary entry)."""
    out = np.zeros((b.n, table.shape[1]))
    for lo in range(0, len(b.tok), CHUNK):
        tok, owner = b.tok[lo : lo + CHUNK], b.owner[lo : lo + CHUNK]
        starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
        out[owner[starts]] += np.add.reduceat(table[tok] * (b.cnt[lo : lo + CHUNK] * weight[tok])[:, None], starts)
    return out


def weight_grad(b: Bags, table: Array, weight: Array, g: Array) -> Array:
    """∂L/∂v of the pooled vectors given ∂L/∂pooled = g, where weight = exp(table · v)."""
    h = np.zeros(len(table))
    for lo in range(0, len(b.tok), CHUNK):
        tok, owner = b.tok[lo : lo + CHUNK], b.owner[lo : lo + CHUNK]
        h += np.bincount(tok, b.cnt[lo : lo + CHUNK] * (g[owner] * table[tok]).sum(1), len(table))
    out: Array = table.T @ (weight * h)
    return out


def train_weights(sets: list[Set], table: Array, epochs: int, tau: float, decay: float, lr: float, seed: int) -> Array:
    """v of the token weights exp(v · e_token)."""
    opt = Adam(np.zeros(table.shape[1]), lr)
    for s, idx in batches(sets, np.random.default_rng(seed), epochs):
        weight = np.exp(np.clip(table @ opt.x, -20, 20))
        qb = s.qbags.rows(idx)
        a, an = unit(pool(qb, table, weight))
        b, bn = unit(pool(s.dbags, table, weight))
        da, db = softmax_grads(a, an, b, bn, s.target(idx), tau)
        grad = weight_grad(qb, table, weight, da) + weight_grad(s.dbags, table, weight, db)
        opt.step(grad + 2 * decay * opt.x)
    return opt.x


def relevance(s: Set, adapter: Array | None, form: str, table: Array) -> Array:
    if adapter is None:
        return s.q @ s.d.T
    if form == "weight":
        weight = np.exp(np.clip(table @ adapter, -20, 20))
        return unit(pool(s.qbags, table, weight))[0] @ unit(pool(s.dbags, table, weight))[0].T
    qa = unit(s.q @ adapter.T)[0]
    return qa @ (unit(s.d @ adapter.T)[0] if form == "shared" else s.d).T


def top1(scores: Array, right: list[list[int]]) -> float:
    return float(np.mean([b in r for b, r in zip(scores.argmax(axis=1), right, strict=True)]))


def measure(s: Set, adapter: Array | None, form: str, table: Array) -> tuple[float, float]:
    """Top-1 of the cosine and of the prior ((cosine + 0.25 BM25) / 1.25)."""
    cos = relevance(s, adapter, form, table)
    return top1(cos, s.right), top1((np.clip(cos, 0, 1) + 0.25 * s.bm25) / 1.25, s.right)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", nargs="+", default=list(LICENSED))
    parser.add_argument("--form", choices=["shared", "query", "weight"], default="shared")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tau", type=float, default=0.05)
    parser.add_argument("--decay", type=float, default=0.01)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-held-out", dest="held_out", action="store_false", help="train on all sets only")
    args = parser.parse_args()
    cache = HERE / "out" / f"adapter-{'-'.join(args.sets)}.pickle"  # this script's own output
    if cache.exists():
        sets, everyday = pickle.loads(cache.read_bytes())
    else:
        sets = [load(n) for n in args.sets]
        everyday = asyncio.run(everyday_set())
        embed([*sets, everyday], WordLlamaEmbedder())
        cache.parent.mkdir(exist_ok=True)
        cache.write_bytes(pickle.dumps((sets, everyday)))
    table = WordLlamaEmbedder().model.embedding.astype(np.float64)
    hyper = (args.epochs, args.tau, args.decay, args.lr, args.seed)

    def fit(train_sets: list[Set]) -> Array:
        if args.form == "weight":
            return train_weights(train_sets, table, *hyper)
        return train_map(train_sets, args.form, *hyper)

    print(f"form={args.form} epochs={args.epochs} tau={args.tau} decay={args.decay} lr={args.lr}, top-1:\n")
    print(
        "| held out | requests / tools | BM25 | cosine | adapted | prior | adapted prior | everyday: adapted / prior |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for held in sets if args.held_out else []:
        adapter = fit([s for s in sets if s is not held])
        (cos, prior), (new, new_prior) = measure(held, None, args.form, table), measure(held, adapter, args.form, table)
        day = measure(everyday, adapter, args.form, table)
        print(
            f"| {held.name} | {len(held.queries)} / {len(held.documents)} | {top1(held.bm25, held.right):.1%} "
            f"| {cos:.1%} | {new:.1%} | {prior:.1%} | {new_prior:.1%} | {day[0]:.0%} / {day[1]:.0%} |",
            flush=True,
        )
    adapter = fit(sets)
    for s in sets:  # in-sample: does it fit what it was trained on?
        before, after = measure(s, None, args.form, table)[0], measure(s, adapter, args.form, table)[0]
        print(f"in-sample {s.name}: cosine {before:.1%} → {after:.1%}")
    (cos, prior), (new, new_prior) = (
        measure(everyday, None, args.form, table),
        measure(everyday, adapter, args.form, table),
    )
    print(
        f"\neveryday, trained on all of {', '.join(args.sets)}: cosine {cos:.0%} → {new:.0%},"
        f" prior {prior:.0%} → {new_prior:.0%}, BM25 {top1(everyday.bm25, everyday.right):.0%}"
    )


if __name__ == "__main__":
    main()
