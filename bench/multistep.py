"""Multi-step tool use, as an agent that picks the tools itself drives toolwise: real conversations
(bench/data/<set>/chains.jsonl: the calls of each in order, with the user text each answered) replayed
through toolwise's MCP surface, next to simple references learning online from the same calls.

For each conversation, at every step: `recommend_next_tools(session_id)` (from the second step) and
`recommend_tool(step text, session_id)` are asked, then the agent calls the step's true tool (every
call succeeds: the agent is right). Two flows: tagged (the call carries `_meta["toolwise/session_id"]`)
and agent-framework (session_id on toolwise's tools only, the call plain). Figures per window of
conversations (hit rates of the steps inside it, steps 2+): next-tool hit@1 and hit@3,
`recommend_tool` hit@1. References (bench/references.py), on the same stream in the same run:
most frequent, the seed's ≥ 2-occurrence rule, Witten-Bell trigram (next tool); text prior alone,
text prior × bigram, per-tool ridge on choices (tool for a step's text).

    python bench/multistep.py [--data bench/data/bfcl_multi_turn bench/data/nestful] [--quick] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from real_queries import config
from references import MostFrequent, PriorTimesBigram, RidgeOnChoices, SeedRule, WittenBell

from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.learning.sessions import session_meta
from toolwise.rl import Learner, LearnerConfig, ToolDoc
from toolwise.rl.policies.base import FEATURES
from toolwise.rl.policies.choice import ChoiceModel
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

HERE = Path(__file__).resolve().parent
SERVER = "cat"
WINDOWS = (100, 250, 500, 1000)


@dataclass
class Hits:
    """Per step (steps 2+ of each conversation): which conversation, and a hit or not per measure."""

    chain: list[int] = field(default_factory=list)
    marks: dict[str, list[bool]] = field(default_factory=dict)

    def add(self, chain: int, **hit: bool) -> None:
        self.chain.append(chain)
        for name, value in hit.items():
            self.marks.setdefault(name, []).append(value)

    def window(self, name: str, start: int, stop: int) -> float:
        chains = np.array(self.chain)
        inside = (chains >= start) & (chains < stop)
        return float(np.mean(np.array(self.marks[name])[inside])) if inside.any() else float("nan")


def load(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tools = [json.loads(line) for line in (path / "tools.jsonl").read_text().splitlines()]
    chains = [json.loads(line) for line in (path / "chains.jsonl").read_text().splitlines()]
    return tools, chains


def public_names(app: Toolwise) -> dict[str, str]:
    """Each data-set tool's public name in toolwise (`cat__…`)."""
    return {r.tool: t.name for t in app.catalogue.tools() if (r := app.catalogue.resolve(t.name)) is not None}


@asynccontextmanager
async def served(tools_file: Path, seed: int) -> AsyncIterator[tuple[Toolwise, Client, dict[str, str]]]:
    """A fresh toolwise over the data set's tools (on a database of its own), an in-process client on it,
    and its public name of each data-set tool."""
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Toolwise(config(tools_file, Path(tmp) / "toolwise.db", seed)) as app,
            Client(build_server(app), mode="legacy") as client,
        ):
            yield app, client, public_names(app)


async def end_session(client: Client, session: str, outcome: str) -> None:
    ended = await client.call_tool("end_session", {"session_id": session, "outcome": outcome})
    if ended.is_error:
        raise RuntimeError(f"end_session failed: {ended.content}")


async def toolwise_run(
    tools_file: Path, chains: list[dict[str, Any]], flow: str, seed: int
) -> tuple[Hits, dict[str, str], list[ToolDoc], float]:
    """The stream through toolwise; also its public name of each data-set tool and its tool documents."""
    hits = Hits()
    async with served(tools_file, seed) as (app, client, public):
        started = time.perf_counter()
        for i, chain in enumerate(chains):
            session = f"conversation-{i}"
            for j, step in enumerate(chain["steps"]):
                truth = public[step["tool"]]
                rec = await client.call_tool(
                    "recommend_tool", {"query": step["text"], "session_id": session, "top_k": 1}
                )
                if j:
                    nxt = await client.call_tool("recommend_next_tools", {"session_id": session, "top_k": 3})
                    ranked = [r["tool"] for r in nxt.structured_content["recommendations"]]
                    picked = rec.structured_content["recommendations"][0]["tool"]
                    hits.add(i, next1=ranked[:1] == [truth], next3=truth in ranked, tool1=picked == truth)
                meta = session_meta(session) if flow == "tagged" else None
                result = await client.call_tool(truth, {"expect": [step["tool"]]}, meta=meta)
                if result.is_error:
                    raise RuntimeError(f"{truth} failed: {result.content}")
            await end_session(client, session, "success")
        elapsed = time.perf_counter() - started
        docs = list(app.learning.tool_docs)
        policy = app.learning.learner.policy
        if isinstance(policy, ChoiceModel):  # the prior's mix as this set taught it
            mix = ", ".join(f"{n} {w:.2f}" for n, w in zip(FEATURES, policy.weights, strict=True))
            print(f"  {flow}: learned feature weights: {mix}")
    return hits, public, docs, elapsed


def references(
    chains: list[dict[str, Any]], public: dict[str, str], docs: list[ToolDoc], embedder: WordLlamaEmbedder
) -> Hits:
    """The references on the same stream, each learning from the past calls only."""
    prior = Learner(LearnerConfig(), docs, embedder)  # toolwise's zero-shot prior, never learning
    names = list(prior.index.tools.names)
    index = {name: i for i, name in enumerate(names)}
    frequent, seed_rule, trigram = MostFrequent(), SeedRule(), WittenBell(names)
    bigram, ridge = PriorTimesBigram(names), RidgeOnChoices(names)
    hits = Hits()
    for i, chain in enumerate(chains):
        history: list[str] = []
        for j, step in enumerate(chain["steps"]):
            truth, text = public[step["tool"]], step["text"]
            scores = prior.features.prior(text, None)[: len(names)]
            embedding = (
                prior.index.semantic.query(text) if prior.index.semantic is not None else np.zeros(64, np.float32)
            )
            if j:
                ranked = {"most_frequent": frequent.rank(), "seed_rule": seed_rule.rank(history)}
                ranked["trigram_wb"] = trigram.rank(history)
                hit = {f"{k}_next1": v[:1] == [truth] for k, v in ranked.items()}
                hit |= {f"{k}_next3": truth in v[:3] for k, v in ranked.items()}
                hit["most_frequent_tool1"] = ranked["most_frequent"][:1] == [truth]
                hit["prior_tool1"] = names[int(np.argmax(scores))] == truth
                hit["prior_bigram_tool1"] = bigram.rank(scores, history[-1])[:1] == [truth]
                hit["ridge_tool1"] = ridge.rank(embedding, scores)[:1] == [truth]
                hits.add(i, **hit)
            frequent.learn(truth)
            seed_rule.learn(history, truth)
            trigram.learn(history, truth)
            bigram.learn(history[-1] if history else None, truth)
            ridge.learn(embedding, scores, index[truth])
            history.append(truth)
    return hits


def table(name: str, ours: dict[str, Hits], refs: Hits, windows: list[tuple[int, int]]) -> str:
    next_refs = ("most_frequent", "seed_rule", "trigram_wb")
    tool_refs = ("most_frequent", "prior", "prior_bigram", "ridge")
    flows = list(ours)
    head = (
        f"{'chains':>11} | "
        + " ".join(f"{f[:6]:>6}" for f in flows)
        + " | "
        + " ".join(f"{r[:8]:>8}" for r in next_refs)
        + " || "
        + " ".join(f"{f[:6]:>6}" for f in flows)
        + " | "
        + " ".join(f"{r[:12]:>12}" for r in tool_refs)
    )
    lines = [f"{name}: next-tool hit@3 (hit@1) || recommend_tool hit@1, steps 2+", head]
    for start, stop in windows:
        row = f"{start:>5}-{stop:<5} | "
        row += " ".join(f"{ours[f].window('next3', start, stop):6.3f}" for f in flows) + " | "
        row += " ".join(f"{refs.window(f'{r}_next3', start, stop):8.3f}" for r in next_refs) + " || "
        row += " ".join(f"{ours[f].window('tool1', start, stop):6.3f}" for f in flows) + " | "
        row += " ".join(f"{refs.window(f'{r}_tool1', start, stop):12.3f}" for r in tool_refs)
        lines.append(row)
        one = f"{'':11} | " + " ".join(f"({ours[f].window('next1', start, stop):.2f})".rjust(6) for f in flows)
        one += " | " + " ".join(f"({refs.window(f'{r}_next1', start, stop):.2f})".rjust(8) for r in next_refs)
        lines.append(one)
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, nargs="+", default=[HERE / "data" / "bfcl_multi_turn", HERE / "data" / "nestful"]
    )
    parser.add_argument("--flows", default="tagged,framework")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="the first 120 conversations of each set (a smoke run)")
    args = parser.parse_args()
    embedder = WordLlamaEmbedder()
    for path in args.data:
        tools, chains = load(path)
        chains = [chains[i] for i in np.random.default_rng(args.seed).permutation(len(chains))]
        if args.quick:
            chains = chains[:120]
        steps = sum(len(c["steps"]) for c in chains)
        print(f"\n{path.name}: {len(tools)} tools, {len(chains)} conversations, {steps} calls, seed {args.seed}")
        ours: dict[str, Hits] = {}
        for flow in args.flows.split(","):
            ours[flow], public, docs, elapsed = await toolwise_run(path / "tools.jsonl", chains, flow, args.seed)
            per_step = elapsed / steps * 1000
            print(f"  {flow}: {elapsed:.0f} s through the MCP surface ({per_step:.1f} ms a step, 3 requests)")
        refs = references(chains, public, docs, embedder)
        edges = [0, *[w for w in WINDOWS if w < len(chains)], len(chains)]
        print(table(path.name, ours, refs, list(itertools.pairwise(edges))))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    asyncio.run(main())
