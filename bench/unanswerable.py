"""Saying "nothing fits" to requests no tool of the catalogue serves, and what it costs on those it does.

For each data set (bench/data/<set>: bfcl_live, nestful, bfcl_multi_turn; and `everyday`: the README's
example, mcp-server-time and mcp-server-git started as toolwise.example.json says, 14 short-described
tools, with bench/everyday.py's 36 requests; and, when named in --sets, `mcp_manager`: 293 MCP servers'
2,651 tools with an LLM-written request each, bench/extract_mcp.py, one request in 8 judged), four
kinds of request:

- answerable: the set's requests against its whole catalogue. hit@1 is toolwise's first pick being a
  right tool; a request answered "nothing fits" counts as a miss, so the drop in hit@1 is its cost.
- held-out (unanswerable): the same requests, each against the catalogue without its right tools (and
  without the tools that share a right tool's description or last name segment, `weather.get_current_
  weather` beside `get_current_weather`): the request is of the catalogue's own domain, its tool missing.
- BFCL irrelevance and live irrelevance (unanswerable; bench/data/bfcl_irrelevance, extracted by
  bench/extract_data.py): requests none of the functions they came with serves, against the set's
  catalogue. Some are served by a tool of a catalogue (live irrelevance came from the users whose
  functions make up BFCL live: "the weather in Boston" meets get_current_weather), so a share of them
  is rightly answered; the figures count every one as unanswerable.
- server missing (unanswerable; bench/unanswerable_servers.py): each request against its catalogue
  without every tool of its server (BFCL multi-turn's API classes, the example's time and git; BFCL
  live and NESTFUL give no grouping): what an MCP user meets, "find me a recipe" with no recipe server.
  After learning, its learner's catalogue never had that server, nor learned its requests.

Each request falls in a calibration or a test split (CRC-32 of its id). Methods, each deciding
"nothing fits" per request, reported on the test split of every set:

1. always answer (every search today);
2. BM25 threshold: nothing fits when the best BM25 score of the query (Okapi, k1 1.2, b 0.75, over the
   same tool documents) is below a threshold;
3. embedding-cosine threshold: the same with the best cosine of WordLlama embeddings;
4. toolwise: `Learner.recommend`'s `nothing_fits` with its default `FitConfig` (rl/fit.py: its own
   model and `DomainFit`, for a request of the catalogue's domain whose tool is missing), learned from
   nothing (a fresh learner per catalogue).

The references' thresholds are the best single ones on the calibration splits of `--calibrate`'s sets
(BFCL live and everyday: long and short tool descriptions, whose relevance levels differ): the most
unanswerable requests caught with at most TARGET_DROP points of hit@1 lost on each; toolwise's
defaults were fitted on the same splits by `--fit` (which prints them; bench/unanswerable_fitting.py),
its thresholds chosen the same way.

Then the learned arm (bench/unanswerable_learned.py): toolwise after a stream of each catalogue's
calibration answerable requests (right tools called, working), judging the test split's requests (none
of their texts learned). Beside it in the same run: the embedding-cosine threshold, the nearest served
request threshold (the best cosine of the request to any request a candidate worked for: the same
learned memory, used simply), and toolwise's zero-shot model on the same learner. Their thresholds and
`FitConfig.learned` (`--fit`) are chosen on `--calibrate-learned`'s sets (BFCL live, NESTFUL, BFCL
multi-turn; the example has too few requests to learn from half and judge the other half); last, the
example's requests each judged after learning all the others twice (a check, not fitted on). Requests
no tool serves tried by an agent and failing, learned too: bench/unanswerable_missing.py, run on its own.
Figures in docs/benchmarks.md come from

    python bench/unanswerable.py                 # about 4 minutes
    python bench/unanswerable.py --fit           # refit FitConfig's defaults, both parts (prints them)
    python bench/unanswerable.py --loco          # and each catalogue judged by toolwise fitted on the others
    python bench/unanswerable.py --sets bfcl_multi_turn,everyday --calibrate everyday --zero-shot  # iterating
    python bench/unanswerable.py --sets bfcl_live,nestful,bfcl_multi_turn,everyday,mcp_manager  # + MCP servers
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import shutil
import sys
import tempfile
import zlib
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import unanswerable_learned as learned
from everyday import EXAMPLE, REQUESTS
from unanswerable_fitting import KINDS, TARGET_DROP, Judged, fit, logistic, threshold
from unanswerable_loco import leave_one_out
from unanswerable_servers import KIND, server_groups, server_map, without_servers

from toolwise.config import AppConfig
from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.rl.embedding import name_words
from toolwise.rl.fit import FitConfig, relevance_of
from toolwise.rl.learner import Learner, LearnerConfig
from toolwise.rl.text import tokenize
from toolwise.rl.toolindex import ToolDoc
from toolwise.server.app import Toolwise

HERE = Path(__file__).resolve().parent
SETS = ("bfcl_live", "nestful", "bfcl_multi_turn")
# Extracted, not vendored (bench/extract_mcp.py), loaded only when named; one request in SAMPLED[name]
# kept (fixed by its id, independent of `split`): every held-out request builds its own catalogue.
OPTIONAL = ("mcp_manager",)
SAMPLED = {"mcp_manager": 8}


@dataclass(frozen=True, slots=True)
class Row:
    """One request as each method sees it."""

    kind: str  # answerable, or one of KINDS
    calibration: bool
    hit: bool  # toolwise's first pick is right (never, for an unanswerable request)
    nothing_fits: bool  # toolwise said so
    cosine: float
    coverage: float
    disagreement: float  # log(1 + the candidates BM25 ranks above the embedding's best): rl/fit.py
    bm25: float  # the best raw BM25 score


def split(identifier: str) -> bool:
    """True for the calibration split (half the requests, fixed by their id)."""
    return zlib.crc32(identifier.encode()) % 2 == 0


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bm25_top(documents: Sequence[str], k1: float = 1.2, b: float = 0.75) -> Callable[[str], float]:
    """The best Okapi BM25 score of a query over `documents` (the reference a BM25 search thresholds)."""
    counts = [Counter(tokenize(d)) for d in documents]
    lengths = np.array([sum(c.values()) for c in counts], dtype=float)
    norm = k1 * (1 - b + b * lengths / max(float(lengths.mean()), 1e-9))
    postings: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for row, c in enumerate(counts):
        for term, tf in c.items():
            postings[term].append((row, tf))
    n = len(documents)

    def top(query: str) -> float:
        scores = np.zeros(n)
        for term in tokenize(query):
            found = postings.get(term, [])
            idf = math.log1p((n - len(found) + 0.5) / (len(found) + 0.5))
            for row, tf in found:
                scores[row] += idf * tf * (k1 + 1) / (tf + norm[row])
        return float(scores.max()) if n else 0.0

    return top


class Catalogue:
    """A catalogue as toolwise and the references see it: a fresh learner and a BM25 over its documents."""

    def __init__(self, tools: list[ToolDoc], embedder: WordLlamaEmbedder, fit: FitConfig) -> None:
        self.learner = Learner(LearnerConfig(fit=fit), tools, embedder)
        self.bm25 = bm25_top([t.document for t in tools])
        self.rng = np.random.default_rng(0)

    def row(self, kind: str, identifier: str, query: str, right: frozenset[str]) -> Row:
        decision = self.learner.recommend(query, self.rng, top_k=1)
        relevance = relevance_of(self.learner.index, query, self.learner.index.active)
        if relevance is None:
            raise RuntimeError(f"no relevance for {identifier}: the learner has no embedder or no tools")
        hit = decision.ranked[0].tool in right
        return Row(
            kind,
            split(identifier),
            hit,
            decision.nothing_fits,
            relevance.cosine,
            relevance.coverage,
            relevance.disagreement,
            self.bm25(query),
        )


def last_words(name: str) -> str:
    return name_words(name.rsplit(".", maxsplit=1)[-1]).lower()


def without(tools: list[ToolDoc], right: frozenset[str]) -> list[ToolDoc]:
    """The catalogue without the right tools and those sharing a right tool's description or last name."""
    gone = [t for t in tools if t.name in right]
    descriptions = {t.description.strip().lower() for t in gone} - {""}
    names = {last_words(t.name) for t in gone}
    return [
        t
        for t in tools
        if t.name not in right and t.description.strip().lower() not in descriptions and last_words(t.name) not in names
    ]


def remaining(tools: list[ToolDoc], right: frozenset[str]) -> list[str]:
    """The names `without` keeps: a held-out request's candidates."""
    return [t.name for t in without(tools, right)]


@dataclass(frozen=True, slots=True)
class DataSet:
    tools: list[ToolDoc]
    requests: list[dict[str, Any]]  # {id, query, tools: the right ones}
    server_of: dict[str, str] | None = None  # each tool's server, where the data says (unanswerable_servers.py)


def sampled(name: str, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    every = SAMPLED.get(name, 1)
    return [r for r in requests if zlib.crc32(f"sample-{r['id']}".encode()) % every == 0]


def data_set(name: str) -> DataSet:
    """A set of bench/data as the server would describe its tools (`tool_document`, no annotations)."""
    if not (HERE / "data" / name / "queries.jsonl").exists():
        sys.exit(f"bench/data/{name} is missing: build it with bench/extract_data.py {name} <its git dir>")
    tools = [
        ToolDoc(
            t["name"],
            t.get("description", ""),
            tool_document(t["name"], None, t.get("description"), t.get("parameters")),
        )
        for t in load(HERE / "data" / name / "tools.jsonl")
    ]
    return DataSet(tools, sampled(name, load(HERE / "data" / name / "queries.jsonl")), server_map(name, tools))


async def everyday_set() -> DataSet:
    """The README's example (toolwise.example.json: mcp-server-time and mcp-server-git, 14 tools, their
    annotations read) as toolwise describes it after starting them, and bench/everyday.py's requests."""
    servers = json.loads(EXAMPLE.read_text())["mcpServers"]
    for spec in servers.values():  # installed beside this Python when its folder is not on PATH
        spec["command"] = shutil.which(spec["command"]) or str(Path(sys.executable).parent / spec["command"])
    with tempfile.TemporaryDirectory() as tmp:
        settings = {"database_url": f"sqlite+aiosqlite:///{tmp}/unanswerable.db", "snapshot_interval_s": 0}
        async with Toolwise(AppConfig.model_validate({"mcpServers": servers, "toolwise": settings})) as app:
            tools = list(app.learning.tool_docs)
    if len(tools) < 14:
        sys.exit(
            f"the README example's servers served {len(tools)} tools, not 14: "
            "are mcp-server-time and mcp-server-git installed?"
        )
    requests = [{"id": f"everyday-{i}", "query": r.query, "tools": list(r.right)} for i, r in enumerate(REQUESTS)]
    return DataSet(tools, requests, server_map("everyday", tools))


def rows_of(data: DataSet, irrelevant: list[dict[str, Any]], embedder: WordLlamaEmbedder, fit: FitConfig) -> list[Row]:
    tools, requests = data.tools, data.requests
    whole = Catalogue(tools, embedder, fit)
    rows = [whole.row("answerable", r["id"], r["query"], frozenset(r["tools"])) for r in requests]
    rows += [whole.row(r["set"], r["id"], r["query"], frozenset()) for r in irrelevant]
    groups: dict[frozenset[str], list[dict[str, Any]]] = defaultdict(list)
    for r in requests:
        groups[frozenset(r["tools"])].append(r)
    for right, members in groups.items():
        held = Catalogue(without(tools, right), embedder, fit)
        rows += [held.row("held-out", r["id"], r["query"], frozenset()) for r in members]
    if data.server_of is not None:
        for gone, members in server_groups(requests, data.server_of).items():
            rest = Catalogue(without_servers(tools, data.server_of, gone), embedder, fit)
            rows += [rest.row(KIND, r["id"], r["query"], frozenset()) for r in members]
    return rows


# -- deciding and scoring ---------------------------------------------------------------------------


Rule = Callable[[Any], bool]  # True: the method says nothing fits (a Row or a learned.LearnedRow)


def scores(rows: Sequence[Judged], rule: Rule) -> dict[str, float]:
    """Per unanswerable kind the share said to fit nothing; answerable hit@1 with the rule and its drop."""
    out = {k: float(np.mean(found)) if (found := [rule(r) for r in rows if r.kind == k]) else math.nan for k in KINDS}
    answerable = [r for r in rows if r.kind == "answerable"]
    always = float(np.mean([r.hit for r in answerable]))
    kept = float(np.mean([r.hit and not rule(r) for r in answerable]))
    return {**out, "hit@1": kept, "drop": 100 * (always - kept)}


def table(results: dict[str, dict[str, float]]) -> str:
    head = "| method | held-out | BFCL irrelevance | BFCL live irrelevance | server missing | answerable hit@1 |"
    head += " drop (points) |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---:|"]
    for method, s in results.items():
        cells = [f"{100 * s[k]:.1f}%" if math.isfinite(s[k]) else "—" for k in KINDS]
        cells += [f"{s['hit@1']:.3f}", f"{s['drop']:.1f}"]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibrate", default="bfcl_live,everyday", help="the sets thresholds are chosen on")
    parser.add_argument(
        "--calibrate-learned", default="bfcl_live,nestful,bfcl_multi_turn", help="the sets the learned arm fits on"
    )
    parser.add_argument("--fit", action="store_true", help="fit FitConfig on the calibration splits and use it")
    parser.add_argument("--loco", action="store_true", help="also fit without each catalogue and judge it")
    parser.add_argument("--sets", default=",".join((*SETS, "everyday")), help="the catalogues to load (iterating)")
    parser.add_argument("--zero-shot", action="store_true", help="skip the learned arm (iterating)")
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    irrelevant = load(HERE / "data" / "bfcl_irrelevance" / "queries.jsonl")
    names = args.sets.split(",")
    if unknown := set(names) - {*SETS, "everyday", *OPTIONAL}:
        parser.error(f"--sets: unknown set(s) {sorted(unknown)}, known: {[*SETS, 'everyday', *OPTIONAL]}")
    sets = {name: data_set(name) for name in (*SETS, *OPTIONAL) if name in names}
    if "everyday" in names:
        sets["everyday"] = await everyday_set()
    chosen = args.calibrate.split(",")
    if unknown := set(chosen) - set(sets):
        parser.error(f"--calibrate: unknown set(s) {sorted(unknown)}, known: {sorted(sets)}")
    config = FitConfig()
    rows = {name: rows_of(data, irrelevant, embedder, config) for name, data in sets.items()}
    calibration = [[r for r in rows[name] if r.calibration] for name in chosen]
    if args.fit:
        config = fit(calibration)
        print(f"fitted on the calibration splits of {', '.join(chosen)}: {config}")
        rows = {name: rows_of(data, irrelevant, embedder, config) for name, data in sets.items()}
    bm25_at = threshold(calibration, lambda r: r.bm25)
    cosine_at = threshold(calibration, lambda r: r.cosine)
    methods: dict[str, Rule] = {
        "always answer": lambda r: False,
        f"BM25 threshold ({bm25_at:.2f})": lambda r: r.bm25 < bm25_at,
        f"embedding-cosine threshold ({cosine_at:.3f})": lambda r: r.cosine < cosine_at,
        "toolwise (rl/fit.py defaults)": lambda r: r.nothing_fits,
    }
    print(f"thresholds chosen on the calibration splits of {', '.join(chosen)} (≤ {TARGET_DROP} points lost on each)")
    for name, data in sets.items():
        test = [r for r in rows[name] if not r.calibration]
        print_set(name, len(data.tools), test, methods)
    if args.zero_shot:
        return
    learned_sets = args.calibrate_learned.split(",")
    after = learned_arm(sets, irrelevant, embedder, config, learned_sets, args.fit)
    if args.loco:
        print("\n\nLEAVE ONE CATALOGUE OUT: each catalogue judged by toolwise fitted on the others alone")
        leave_one_out(rows, after, learned_sets, show)


def show(title: str, test: Sequence[Judged], methods: dict[str, Rule]) -> None:
    print(f"\n{title}:\n")
    print(table({method: scores(test, rule) for method, rule in methods.items()}))


def print_set(name: str, tools: int, test: Sequence[Judged], methods: dict[str, Rule]) -> None:
    counts = Counter(r.kind for r in test)
    sizes = ", ".join(f"{counts[k]} {k}" for k in ("answerable", *KINDS))
    print(f"\n{name} ({tools} tools), test split ({sizes}):\n")
    print(table({method: scores(test, rule) for method, rule in methods.items()}))


def learned_arm(
    sets: dict[str, DataSet],
    irrelevant: list[dict[str, Any]],
    embedder: WordLlamaEmbedder,
    config: FitConfig,
    chosen: list[str],
    refit: bool,
) -> dict[str, tuple[list[learned.LearnedRow], list[learned.LearnedRow]]]:
    """The learned arm (bench/unanswerable_learned.py): each catalogue after a stream of its calibration
    split's answerable requests; thresholds and, with `refit`, FitConfig.learned chosen on `chosen`."""
    if unknown := set(chosen) - set(sets):
        sys.exit(f"--calibrate-learned: unknown set(s) {sorted(unknown)}, known: {sorted(sets)}")

    def rows_for(config: FitConfig) -> dict[str, tuple[list[learned.LearnedRow], list[learned.LearnedRow]]]:
        out = {}
        for name, data in sets.items():
            held = partial(remaining, data.tools)
            out[name] = learned.split_rows(
                data.tools, data.requests, irrelevant, embedder, config, held, split, data.server_of
            )
        return out

    rows = rows_for(config)
    calibration = [rows[name][0] for name in chosen]
    if refit:
        config = replace(config, learned=learned.fit_learned(calibration, config, logistic))
        print(f"\nlearned part fitted on the calibration splits of {', '.join(chosen)}: {config.learned}")
        rows = rows_for(config)
    cosine_at = learned.threshold(calibration, lambda r: r.cosine)
    nearest_at = learned.threshold(calibration, lambda r: r.nearest)
    methods: dict[str, Rule] = {
        "always answer": lambda r: False,
        f"embedding-cosine threshold ({cosine_at:.3f})": lambda r: r.cosine < cosine_at,
        f"nearest served request threshold ({nearest_at:.3f})": lambda r: r.nearest < nearest_at,
        "toolwise zero-shot model": learned.zero_shot(config),
        "toolwise (learned, rl/fit.py defaults)": lambda r: r.nothing_fits,
    }
    print(
        f"\n\nAFTER LEARNING each catalogue's calibration split (answerable requests, right tools working); "
        f"thresholds chosen on {', '.join(chosen)} (half of each calibration split learned, half judged)"
    )
    for name, data in sets.items():
        print_set(name, len(data.tools), rows[name][1], methods)
    example = sets.get("everyday")
    if example is None:
        return rows
    again = learned.each_after_the_others(
        example.tools, example.requests, embedder, config, partial(remaining, example.tools), example.server_of
    )
    print("\n\neveryday, each request (answerable, held-out, server missing) after learning all the others twice:\n")
    print(table({method: scores(again, rule) for method, rule in methods.items()}))
    return rows


if __name__ == "__main__":
    logging.getLogger("client").setLevel(logging.ERROR)
    asyncio.run(main())
