"""Can toolwise correct the agent it watches? An imperfect agent (bench/imperfect_agent.py: right 60% or
80% of the time on real requests, its recurring confusions on the requests whose text misleads most; a
wrong call fails half the time, else it works and is rated 1–2 half the time) meets a stream of 2,500
requests drawn in shuffled passes over a real set (BFCL live, 1,351 requests, each about twice; NESTFUL,
300, about eight times), each arm a fresh toolwise through its MCP surface (an in-process `mcp.Client`, a
fake downstream serving the catalogue whose calls fail or work as the simulation says, ratings through
`submit_feedback`). The world (which requests the agent is confused on, with which tools; the ridge's query
vectors) is built from a fixed reference embedding the bench computes itself (bench/reference_embedding.py:
WordLlama's whole-document mean, toolwise's prior up to b4d7f43), never from the embedding under test: a
change of toolwise's prior is judged on the same agent and the same confusions.

- counterfactual consult: before each request `recommend_tool(query)`; its top-1, `confidence` and `p_agent`
  (where it exists) are recorded, and the agent calls its own choice (toolwise learns the agent's calls);
- live consult: the agent calls toolwise's top-1 when its `confidence` ≥ `--follow` (0.5), else its own
  choice (toolwise learns whatever was called).

References on the same stream, same run: the agent alone; the imitation logit (toolwise's choice model,
policy "choice", both arms; the toolwise arms themselves when that is the policy run); the outcome ridge
(per tool, ridge regression of "the call was good" on the query embedding, learning from the same calls,
the agent's choice where nothing has evidence; numpy, no MCP). Printed next to the targets of issue 34:
the gain of following toolwise (last 1,000 requests), toolwise's top-1 on the recurring confusions by
window of 500, and the reliability of `confidence` against "a call of its top-1 would work" (1 for a right
tool; a wrong one works when it neither fails nor is rated 1–2: `Stream.works`; 10 bins, expected
calibration error). A request with several right tools (NESTFUL's chains) counts any of them right.

    python bench/outcomes.py                   # both sets, today's default policy (~7 min on 2 cores)
    python bench/outcomes.py --policy choice   # another policy: the imitation logit's arms run too (×2)
    python bench/outcomes.py --quick           # 400 requests over 100 of BFCL live's, 60% only (~30 s)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from imperfect_agent import OutcomeRidge, Request, Stream, Trouble, difficulty, load, simulate, troubles
from mcp import Client
from multistep import public_names
from numpy.typing import NDArray
from outcome_report import Arm, Verdict, report
from real_queries import config
from reference_embedding import ReferenceEmbedding

from toolwise.config import Settings
from toolwise.learning.sessions import EXECUTION_META_KEY, session_meta
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Connected:
    """A fresh toolwise, an in-process client on it, and its public name of each data-set tool."""

    client: Client
    public: dict[str, str]


async def connect(stack: AsyncExitStack, tools_file: Path, seed: int, policy: str) -> Connected:
    """Started one after the other: two migrations of fresh files at once in one process collide."""
    tmp = stack.enter_context(tempfile.TemporaryDirectory())
    db = Path(tmp) / "toolwise.db"
    app = await stack.enter_async_context(Toolwise(config(tools_file, db, seed, policy=policy, flush_interval_ms=0)))
    client = await stack.enter_async_context(Client(build_server(app), mode="legacy"))
    return Connected(client, public_names(app))


async def checked(client: Client, tool: str, arguments: Mapping[str, object]) -> dict[str, Any]:
    result = await client.call_tool(tool, dict(arguments))
    if result.is_error or result.structured_content is None:
        raise RuntimeError(f"{tool} failed: {result.content}")
    content: dict[str, Any] = result.structured_content
    return content


async def toolwise_arm(toolwise: Connected, stream: Stream, follow: float | None) -> Arm:
    """The stream through toolwise: consulted before every call, followed (live) when `follow` is a level
    its confidence reaches, else only recorded (counterfactual)."""
    client, public = toolwise.client, toolwise.public
    private = {v: k for k, v in public.items()}
    top, confidence, p_agent, called = [], [], [], []
    for i in range(len(stream.order)):
        session = f"conversation-{i}"
        query = stream.request(i).query
        rec = await checked(client, "recommend_tool", {"query": query, "session_id": session, "top_k": 1})
        first = rec["recommendations"][0]
        top.append(private[first["tool"]])
        confidence.append(float(first["confidence"]))
        reported = first.get("p_agent")  # not reported before issue 34
        p_agent.append(np.nan if reported is None else float(reported))
        pick = top[-1] if follow is not None and confidence[-1] >= follow else stream.choice[i]
        called.append(pick)
        outcome = stream.outcome(i, pick)
        # the downstream works a call only when `expect` names the tool called
        arguments = {"expect": [pick] if outcome.worked else []}
        result = await client.call_tool(public[pick], arguments, meta=session_meta(session))
        if result.is_error == outcome.worked:
            raise RuntimeError(f"{pick} answered is_error={result.is_error}, the simulation said otherwise")
        if outcome.rating is not None:
            execution = (result.meta or {})[EXECUTION_META_KEY]
            rating = {"rating": outcome.rating, "execution_id": execution, "session_id": session}
            await checked(client, "submit_feedback", rating)
        ended = {"session_id": session, "outcome": "success" if outcome.good else "failure"}
        await checked(client, "end_session", ended)
    return Arm(top, np.array(confidence), np.array(p_agent), called)


def ridge_arms(stream: Stream, names: list[str], queries: dict[str, NDArray[np.float64]]) -> tuple[Arm, Arm]:
    """The outcome ridge, counterfactual (learning the agent's calls) and live (its pick called)."""
    index = {n: i for i, n in enumerate(names)}
    arms = []
    for live in (False, True):
        ridge = OutcomeRidge(len(names))
        top, confidence, called = [], [], []
        for i, own in enumerate(stream.choice):
            x = ridge.features(queries[stream.request(i).query])
            pick, p = ridge.pick(x, index[own])
            top.append(names[pick])
            confidence.append(p)
            called.append(names[pick] if live else own)
            ridge.learn(x, index[called[-1]], stream.outcome(i, called[-1]).good)
        nan = np.full(len(top), np.nan)
        arms.append(Arm(top, np.array(confidence), nan, called))
    return arms[0], arms[1]


@dataclass(frozen=True)
class World:
    """A data set's pool of requests, with what the agent and the ridge need about them."""

    path: Path
    names: list[str]
    pool: list[Request]
    trouble: list[Trouble]
    hardness: NDArray[np.float64] | None  # where the agent's confusions go: the hardest requests (None: random)
    queries: dict[str, NDArray[np.float64]]  # each request's embedding (the reference's)


def world(path: Path, pool_size: int, seed: int, reference: ReferenceEmbedding, confusion: str, confused: str) -> World:
    """Built from the `reference` embedding, never from the one under test: a change of toolwise's prior is
    judged on the same agent, its confusions on the same requests."""
    tools, requests = load(path)
    names = [t["name"] for t in tools]
    pool = [requests[i] for i in np.random.default_rng(seed).permutation(len(requests))[: pool_size or None]]
    vectors = reference.tools(tools)
    embedded = reference.embed([r.query for r in pool])
    queries = dict(zip((r.query for r in pool), embedded, strict=True))
    trouble = troubles(pool, names, vectors, embedded if confusion == "query" else None)
    hardness = difficulty(pool, names, vectors, embedded) if confused == "hard" else None
    return World(path, names, pool, trouble, hardness, queries)


async def arms_of(
    w: World, stream: Stream, policies: list[str], seed: int, follow: float
) -> dict[str, tuple[Arm, Arm]]:
    """Per policy, toolwise's counterfactual and live arms on the stream; then the outcome ridge's."""
    arms: dict[str, tuple[Arm, Arm]] = {}
    for policy in dict.fromkeys(policies):
        started = time.perf_counter()
        async with AsyncExitStack() as stack:
            pair = [await connect(stack, w.path / "tools.jsonl", seed, policy) for _ in range(2)]
            # side by side: each waits on its store much of the time
            counterfactual, live = await asyncio.gather(
                toolwise_arm(pair[0], stream, None), toolwise_arm(pair[1], stream, follow)
            )
        label = f"imitation logit ({policy})" if policy != policies[0] else f"toolwise ({policy})"
        if policy == policies[0] == "choice":
            label = "toolwise (choice = imitation logit)"
        arms[label] = (counterfactual, live)
        print(f"  {label}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    arms["outcome ridge (reference)"] = ridge_arms(stream, w.names, w.queries)
    return arms


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, nargs="+", default=[HERE / "data" / "bfcl_live", HERE / "data" / "nestful"]
    )
    parser.add_argument("--accuracy", default="0.6,0.8", help="the agent's accuracies, comma-separated")
    parser.add_argument("--recurring", type=float, default=0.6, help="share of its mistakes that recur")
    parser.add_argument("--requests", type=int, default=2_500)
    parser.add_argument("--pool", type=int, default=0, help="requests drawn from the set, which then recur (0: all)")
    parser.add_argument(
        "--confusion", choices=["query", "tool"], default="query", help="mistakes: wrong tools most similar to"
    )
    parser.add_argument(
        "--confused", choices=["hard", "random"], default="hard", help="which requests the agent's confusions are on"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="runs, with seeds --seed, --seed + 1, …")
    parser.add_argument("--policy", default=Settings.model_fields["policy"].default, help="toolwise's policy")
    parser.add_argument("--follow", type=float, default=0.5, help="the confidence the agent follows toolwise at")
    parser.add_argument("--quick", action="store_true", help="400 requests over 100, one set, one agent (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.requests, args.pool, args.data, args.accuracy = 400, 100, args.data[:1], args.accuracy.split(",")[0]
    reference = ReferenceEmbedding()
    verdicts: dict[str, list[Verdict]] = {}
    for path in args.data:
        for seed in range(args.seed, args.seed + args.seeds):
            w = world(path, args.pool, seed, reference, args.confusion, args.confused)
            print(
                f"\n{path.name}: {len(w.names)} tools, {len(w.pool)} requests recurring over {args.requests:,}, "
                f"seed {seed}, policy {args.policy!r}, follow at confidence ≥ {args.follow}"
            )
            for accuracy in (float(a) for a in args.accuracy.split(",")):
                stream = simulate(w.pool, w.trouble, accuracy, args.recurring, args.requests, seed, w.hardness)
                arms = await arms_of(w, stream, [args.policy, "choice"], seed, args.follow)
                label = f"{path.name}, agent {accuracy:.0%}"
                verdicts.setdefault(label, []).append(report(f"{label}, seed {seed}", stream, accuracy, arms))
    print(f"\nissue 34's targets, toolwise ({args.policy}):")
    for label, runs in verdicts.items():
        print("\n".join(v.row() for v in runs))
        if len(runs) > 1:
            print(Verdict.mean(f"{label}, mean", runs).row())


if __name__ == "__main__":
    asyncio.run(main())
