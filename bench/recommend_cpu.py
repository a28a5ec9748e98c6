"""recommend_tool's CPU time per call at 1,000 tools, on a fresh state and after learned calls, and its
answers on a fixed stream, so that a change to the recommendation path can be shown to keep them
bit-identical (same tools, scores and confidences to the last digit).

toolwise at `--tools` tools (bench/data/<set>/ padded with renamed copies, as bench/real_queries.py's
speed part does) behind an in-process `mcp.Client`; the downstream is bench/catalogue_server.py. Two
phases, each `--queries` recommend_tool calls over a fixed stream of the data set's requests (a third
of them in sessions that already made a call, so the sequence features are read too):

1. fresh: only the calls of the ten sessions that made one learned (bench/real_queries.py --speed-only
   measures the zero-shot path, nothing learned);
2. learned: after `--learn` calls (recommend, call the top pick, end the session, as an agent that
   follows toolwise does), so the choice model, the outcome memory and the n-grams have evidence.

The reward's latency terms are set to 0 so that what is learned does not depend on how fast the
downstream answered (the state, hence the answers, are the same run to run); the recommendation path
is the default one. CPU is the event loop's thread time per round trip (client and server both run
there), which other work on a shared machine moves far less than the wall time; beside it the process's
CPU per call (every thread: BLAS's, the learning thread's), so that no work hides on another thread. The
code before a change is measured with its `src` first on PYTHONPATH, beside or alternating with the code
after (docs/benchmarks.md has the figures):

    python bench/recommend_cpu.py [--tools 1000] [--learn 2000] [--queries 300] [--dump answers.json]
    PYTHONPATH=/tmp/base/src python bench/recommend_cpu.py --dump before.json   # the code before
    python bench/recommend_cpu.py --compare before.json answers.json
    python bench/recommend_cpu.py --learner   # Learner.recommend alone, new queries (no MCP), and its decisions' digest
    python bench/recommend_cpu.py --learner --policy all   # the same for every policy (a digest each)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import hashlib
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_queries import HERE, SERVER, DataSet, Request, config, padded_catalogue, stream

import toolwise
from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.learning.sessions import session_meta
from toolwise.rl import Learner, LearnerConfig, Step, ToolDoc
from toolwise.rl.policy_names import POLICY_NAMES
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

NO_LATENCY = {"reward": {"latency_per_second": 0.0, "fast_bonus": 0.0}}


async def run(args: argparse.Namespace, data: DataSet, tools_file: Path) -> dict[str, Any]:
    """Both phases on one toolwise: each phase's answers and CPU ms per call."""
    learned = stream(data, 2, args.seed)[: args.learn]
    measured = [r.query for r in stream(data, 1, args.seed + 1)[: args.queries]]
    profile = cProfile.Profile(time.thread_time) if args.profile else None  # CPU, not the shared wall clock
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(tools_file, Path(tmp) / "toolwise.db", args.seed, **NO_LATENCY)
        async with Toolwise(cfg) as app, Client(build_server(app), mode="legacy") as client:
            for phase in ("fresh", "learned"):
                if phase == "learned":
                    await learn(client, learned)
                open_sessions = await opened(client, data.requests, phase)
                await app.learning.drain()
                answers, cpu = [], []
                process = time.process_time()
                for i, query in enumerate(measured):
                    session = open_sessions[i % len(open_sessions)] if i % 3 == 0 else f"{phase}-{i % 50}"
                    if profile is not None and phase == args.profile:
                        profile.enable()
                    begin = time.thread_time()
                    result = await client.call_tool("recommend_tool", {"query": query, "session_id": session})
                    cpu.append((time.thread_time() - begin) * 1000)
                    if profile is not None:
                        profile.disable()
                    answers.append({"structured": result.structured_content, "text": result.content[0].model_dump()})
                process = (time.process_time() - process) * 1000 / len(measured)
                out[phase] = {"answers": answers, "cpu_ms": cpu, "process_ms": process}
    if profile is not None:
        profile.dump_stats(args.profile_out)
    return out


async def learn(client: Client, requests: list[Request]) -> None:
    """An agent that follows toolwise: recommend, call the top pick, end the session."""
    for i, r in enumerate(requests):
        session = f"learn-{i}"
        rec = await client.call_tool("recommend_tool", {"query": r.query, "session_id": session})
        pick = rec.structured_content["recommendations"][0]["tool"] if rec.structured_content else ""
        result = await client.call_tool(pick, {"expect": sorted(r.right)}, meta=session_meta(session))
        outcome = "failure" if result.is_error else "success"
        ended = await client.call_tool("end_session", {"session_id": session, "outcome": outcome})
        if ended.is_error:
            raise RuntimeError(f"end_session failed: {ended.content}")


async def opened(client: Client, requests: list[Request], phase: str) -> list[str]:
    """Ten sessions that each made one call (left open): recommendations in them read the history."""
    names = []
    for i, r in enumerate(requests[:10]):
        session = f"open-{phase}-{i}"
        rec = await client.call_tool("recommend_tool", {"query": r.query, "session_id": session})
        pick = rec.structured_content["recommendations"][0]["tool"] if rec.structured_content else ""
        await client.call_tool(pick, {"expect": sorted(r.right)}, meta=session_meta(session))
        names.append(session)
    return names


def learner_alone(args: argparse.Namespace, data: DataSet, tools: list[dict[str, Any]], policy: str) -> None:
    """`Learner.recommend` alone (no MCP), a new query each call (its memos emptied each round), on a fresh
    state and after `--learn` steps learned directly (the same stream, latency fixed): CPU p50 of the best
    of three rounds, and a digest of every decision of the first round (equal digests: the same decisions)."""
    docs = [
        ToolDoc(
            f"{SERVER}__{t['name']}",
            t.get("description") or "",
            tool_document(t["name"], None, t.get("description"), t.get("parameters")),
        )
        for t in tools
    ]
    learner = Learner(LearnerConfig(policy=policy), docs, WordLlamaEmbedder())
    queries = [r.query for r in stream(data, 1, args.seed + 1)[: args.queries]]
    names = [d.name for d in docs[:7]]
    for phase in ("fresh", "learned"):
        if phase == "learned":
            rng = np.random.default_rng(args.seed)
            for i, r in enumerate(stream(data, 2, args.seed)[: args.learn]):
                tool = f"{SERVER}__{sorted(r.right)[0]}" if i % 4 else docs[i % len(docs)].name
                ok = tool.removeprefix(f"{SERVER}__") in r.right
                learner.learn(Step(tool, ok, 100.0, r.query, session=f"s{i}", followed=bool(i % 2)), rng)
        best, digest = math.inf, hashlib.sha256()
        for round_ in range(3):
            assert learner.index.semantic is not None
            learner.index.semantic._vectors.clear()
            learner.index.semantic._scores.clear()
            learner.index.lexical._memo.clear()
            learner.config.encoder._contexts.clear()
            getattr(learner.index.semantic.embedder, "_words", {}).clear()  # the words' token ids too
            rng, cpu = np.random.default_rng(7), []
            for i, query in enumerate(queries):
                previous = names[i % 7] if i % 3 == 0 else None
                begin = time.thread_time()
                d = learner.recommend(
                    query,
                    rng,
                    previous_tool=previous,
                    position=int(bool(previous)),
                    history=(previous,) if previous else (),
                )
                cpu.append((time.thread_time() - begin) * 1000)
                if round_ == 0:
                    ranked = [(r.tool, r.score, r.expected, r.prior, r.p_agent, r.evidence) for r in d.ranked]
                    digest.update(
                        repr((d.decision_id, d.context_hash, d.explored, d.propensity, d.nothing_fits, ranked)).encode()
                    )
            best = min(best, float(np.percentile(cpu, 50)))
        print(
            f"  {'' if args.policy == 'outcome' else policy + ' '}{phase}: Learner.recommend alone, "
            f"CPU p50 {best:.3f} ms (best of 3 rounds); "
            f"decisions {digest.hexdigest()[:16]}"
        )


def report(out: dict[str, Any], source: str) -> None:
    print(f"toolwise from {source}")
    for phase, found in out.items():
        cpu = np.array(found["cpu_ms"][20:])  # the first calls warm caches
        print(
            f"  {phase}: recommend_tool CPU per call p50 {np.percentile(cpu, 50):.3f} ms, "
            f"mean {cpu.mean():.3f} ms over {len(cpu)} calls; the process (every thread) {found['process_ms']:.3f} ms"
        )


def compare(before: Path, after: Path) -> None:
    """Exit 1 unless every answer of both phases is the same, to the last digit."""
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    differ = 0
    for phase in ("fresh", "learned"):
        pairs = list(zip(a[phase], b[phase], strict=True))
        bad = [i for i, (x, y) in enumerate(pairs) if x != y]
        differ += len(bad)
        print(
            f"{phase}: {len(pairs) - len(bad)} of {len(pairs)} answers identical"
            + (f"; first differs at {bad[0]}" if bad else "")
        )
    sys.exit(1 if differ else 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "bfcl_live")
    parser.add_argument("--tools", type=int, default=1_000)
    parser.add_argument("--learn", type=int, default=2_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dump", type=Path, help="write both phases' answers here (JSON)")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--profile", choices=("fresh", "learned"), help="cProfile that phase's recommend_tool calls")
    parser.add_argument("--profile-out", type=Path, default=Path("recommend.prof"))
    parser.add_argument("--learner", action="store_true", help="Learner.recommend alone, new queries, no MCP")
    parser.add_argument("--policy", default="outcome", help="with --learner: the policies (a,b,…; all: every one)")
    args = parser.parse_args()
    if args.compare:
        compare(*args.compare)
        return
    data = DataSet.load(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        tools_file = Path(tmp) / "tools.jsonl"
        padded_catalogue(data, args.tools, tools_file)
        if args.learner:
            print(f"toolwise from {Path(toolwise.__file__).parent}")
            tools = [json.loads(line) for line in tools_file.read_text().splitlines()]
            for policy in POLICY_NAMES if args.policy == "all" else args.policy.split(","):
                learner_alone(args, data, tools, policy)
            return
        out = asyncio.run(run(args, data, tools_file))
    report(out, str(Path(toolwise.__file__).parent))
    if args.dump:
        args.dump.write_text(json.dumps({phase: found["answers"] for phase, found in out.items()}))


if __name__ == "__main__":
    main()
