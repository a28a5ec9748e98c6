"""recommend_tool's CPU a call at 1,000 tools, two codes in one process, call for call: on a machine others
load, two runs of bench/recommend_cpu.py or real_queries.py --speed-only differ by ±40% from one minute to
the next, which hides a change of a few percent; here each code answers the same request in turn (who goes
first alternating), so both meet the same load and caches, and each pair of answers is compared.

Each code is imported from its `src` in turn (the modules of the first set aside before the second's are
imported: each keeps its own), and each runs its own toolwise behind its own in-process client, as
real_queries.py --speed-only runs one (nothing learned, a new request each call, 50 sessions). With
`--learner`: `Learner.recommend` alone, as recommend_cpu.py --learner calls it, on a fresh state and after
`--learn` steps. Printed: each code's thread CPU p50 and mean, the ratio, and how many answers were equal
(the decision's ids aside, which each toolwise draws from its own state; the first 50 calls, answered while
the servers start, not compared). The code before a change by `git archive` (docs/benchmarks.md):

    python bench/recommend_ab.py --before /tmp/base/src [--after src] [--queries 600] [--learner]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from mcp import Client

HERE = Path(__file__).resolve().parent
WARM = 50  # calls of each code not timed nor compared: its first answers, while its toolwise starts


def imported(src: Path, *names: str) -> list[ModuleType]:
    """`names` imported from `src`: toolwise's modules (and real_queries, which imports them) already
    imported from another code are set aside first (the objects made from them keep them)."""
    for name in [m for m in sys.modules if m.split(".")[0] in ("toolwise", "real_queries")]:
        del sys.modules[name]
    sys.path.insert(0, str(src))
    sys.path.insert(0, str(HERE))
    try:
        toolwise = importlib.import_module("toolwise")
        if not str(toolwise.__file__).startswith(str(src)):
            raise RuntimeError(f"toolwise came from {toolwise.__file__}, not {src}")
        return [importlib.import_module(name) for name in names]
    finally:
        sys.path.remove(str(src))
        sys.path.remove(str(HERE))


def compared(structured: dict[str, Any] | None, text: str) -> Any:
    """An answer without its decision's ids."""
    found = dict(structured or {})
    found.pop("decision_id", None)
    found.pop("context_hash", None)
    return found, text.replace(str((structured or {}).get("decision_id")), "")


async def round_trips(args: argparse.Namespace) -> tuple[list[list[float]], int]:
    """Each code's CPU per round trip (ms), and the answers equal after the first `WARM`."""
    clients: list[Client] = []
    queries: list[str] = []
    async with contextlib.AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for k, src in enumerate((args.before, args.after)):
            app_module, build, rq = imported(src, "toolwise.server.app", "toolwise.server.build", "real_queries")
            data = rq.DataSet.load(args.data)
            tools = tmp / f"tools{k}.jsonl"
            rq.padded_catalogue(data, args.tools, tools)
            cfg = rq.config(tools, tmp / f"toolwise{k}.db", 0, embedding="wordllama")
            app = await stack.enter_async_context(app_module.Toolwise(cfg))
            client = await stack.enter_async_context(Client(build.build_server(app), mode="legacy"))
            for q in ("warm up", "list the files"):  # its lazily imported modules: its own, before the next code's
                await client.call_tool("recommend_tool", {"query": q, "session_id": "warm"})
            clients.append(client)
            queries = [r.query for r in data.requests[: args.queries]]
        cpu: list[list[float]] = [[], []]
        same = 0
        for i, q in enumerate(queries):
            got: dict[int, Any] = {}
            for k in (0, 1) if i % 2 == 0 else (1, 0):
                begin = time.thread_time()
                result = await clients[k].call_tool("recommend_tool", {"query": q, "session_id": f"s{i % 50}"})
                cpu[k].append((time.thread_time() - begin) * 1000)
                text = result.content[0].text if result.content and result.content[0].type == "text" else ""
                got[k] = compared(result.structured_content, text)
            same += i >= WARM and got[0] == got[1]
    return [c[WARM:] for c in cpu], same


def decisions(args: argparse.Namespace, learn: int) -> tuple[list[list[float]], int]:
    """`Learner.recommend` of each code alone after `learn` steps: CPU per decision (ms, three rounds of
    new queries) and the decisions equal (ids and all)."""
    learners = []
    for src in (args.before, args.after):
        rl, embedding, rq = imported(src, "toolwise.rl", "toolwise.learning.embedding", "real_queries")
        data = rq.DataSet.load(args.data)
        with tempfile.TemporaryDirectory() as tmp:
            tools_file = Path(tmp) / "tools.jsonl"
            rq.padded_catalogue(data, args.tools, tools_file)
            tools = [json.loads(line) for line in tools_file.read_text().splitlines()]
        docs = [
            rl.ToolDoc(
                f"{rq.SERVER}__{t['name']}",
                t.get("description") or "",
                embedding.tool_document(t["name"], None, t.get("description"), t.get("parameters")),
            )
            for t in tools
        ]
        learner = rl.Learner(rl.LearnerConfig(), docs, embedding.WordLlamaEmbedder())
        rng = np.random.default_rng(0)
        for i, r in enumerate(rq.stream(data, 2, 0)[:learn]):  # as recommend_cpu.py --learner learns
            tool = f"{rq.SERVER}__{sorted(r.right)[0]}" if i % 4 else docs[i % len(docs)].name
            ok = tool.removeprefix(f"{rq.SERVER}__") in r.right
            learner.learn(rl.Step(tool, ok, 100.0, r.query, session=f"s{i}", followed=bool(i % 2)), rng)
        learners.append((learner, [d.name for d in docs[:7]]))
        queries = [r.query for r in rq.stream(data, 1, 1)[: args.queries]]
    cpu: list[list[float]] = [[], []]
    same = 0
    for _ in range(3):
        rngs = [np.random.default_rng(7), np.random.default_rng(7)]
        for learner, _names in learners:  # new queries each round: the memos emptied
            learner.index.semantic._vectors.clear()
            learner.index.semantic._scores.clear()
            learner.index.lexical._memo.clear()
            learner.config.encoder._contexts.clear()
            getattr(learner.index.semantic.embedder, "_words", {}).clear()  # the words' token ids too
        for i, q in enumerate(queries):
            got: dict[int, str] = {}
            for k in (0, 1) if i % 2 == 0 else (1, 0):
                learner, names = learners[k]
                previous = names[i % 7] if i % 3 == 0 else None
                history = (previous,) if previous else ()
                begin = time.thread_time()
                d = learner.recommend(q, rngs[k], previous_tool=previous, position=int(bool(previous)), history=history)
                cpu[k].append((time.thread_time() - begin) * 1000)
                ranked = [(r.tool, r.score, r.expected, r.prior, r.p_agent, r.evidence) for r in d.ranked]
                got[k] = repr((d.decision_id, d.context_hash, d.explored, d.propensity, d.nothing_fits, ranked))
            same += got[0] == got[1]
    return cpu, same


def report(what: str, cpu: list[list[float]], same: int) -> None:
    before, after = float(np.median(cpu[0])), float(np.median(cpu[1]))
    print(
        f"{what}: CPU p50 before {before:.3f} ms, after {after:.3f} ms (after/before {after / before:.3f}); "
        f"mean {np.mean(cpu[0]):.3f} · {np.mean(cpu[1]):.3f} ms; {same} of {len(cpu[0])} answers equal"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", type=Path, required=True, help="the code before: its src folder")
    parser.add_argument("--after", type=Path, default=HERE.parent / "src", help="the code after (default: this one)")
    parser.add_argument("--data", type=Path, default=HERE / "data" / "bfcl_live")
    parser.add_argument("--tools", type=int, default=1_000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--learner", action="store_true", help="Learner.recommend alone, fresh and after --learn")
    parser.add_argument("--learn", type=int, default=2_000)
    args = parser.parse_args()
    args.before, args.after = args.before.resolve(), args.after.resolve()
    print(f"before: {args.before}; after: {args.after}; {args.tools:,} tools")
    if args.learner:
        for learn in (0, args.learn):
            report(f"Learner.recommend after {learn:,} steps", *decisions(args, learn))
        return
    cpu, same = asyncio.run(round_trips(args))
    report("recommend_tool round trip (nothing learned)", cpu, same)


if __name__ == "__main__":
    main()
