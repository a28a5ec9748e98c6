"""Does learning keep up? Calls learned per second at 1,000 tools, and what was learned, on real
requests (BFCL live, the catalogue padded with renamed copies).

    python bench/backlog.py [--tools 1000] [--calls 3000]

(a) one call at a time (`Learner.learn`: what the learning thread does with each proxied call while it
keeps up: the choice model's step and its replays), (b) runs of `RUN` calls (`Learner.learn_many`: how a
replay of the log learns), (c) runs of `LEARN_RUN` calls: what the learning thread does once `BEHIND`
calls wait (learning/service.py; calls that follow no recommendation, as these), (d) runs of
`CATCH_UP_RUN` calls: what it does once that many wait (a backlog it catches up on). Each learns the same
stream of calls (each request's right tool, three requests a session), then ranks the tools for
held-out requests: top-1 after each, so a path that is faster because it learned less shows. Each
prints calls/s of wall-clock time and of the process's CPU time (what a shared machine still measures).
Target (issue 35): ≥ 5,000 calls/s in the background.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from toolwise.learning.embedding import load_embedder, tool_document
from toolwise.learning.service import CATCH_UP_RUN, LEARN_RUN
from toolwise.rl import Learner, LearnerConfig, Step, StepColumns, ToolDoc
from toolwise.rl.embedding import Embedder

RUN = 512  # calls a run learns at once (the catch-up replays the log in batches like it)
DATA = Path(__file__).resolve().parent / "data" / "bfcl_live"


def catalogue(size: int) -> list[ToolDoc]:
    """The data set's tools, then renamed copies (same documents) until there are `size`."""
    tools = [json.loads(line) for line in (DATA / "tools.jsonl").read_text().splitlines()]
    docs: list[ToolDoc] = []
    copy = 0
    while len(docs) < size:
        for t in tools[: size - len(docs)]:
            name = t["name"] if copy == 0 else f"{t['name']}_copy{copy}"
            docs.append(ToolDoc(name, t["description"], tool_document(name, None, t["description"], t["parameters"])))
        copy += 1
    return docs


def stream(calls: int) -> tuple[list[Step], list[tuple[str, str]]]:
    """`calls` steps over the requests (cycling), three a session, and held-out (request, right tool)s."""
    rows = [json.loads(line) for line in (DATA / "queries.jsonl").read_text().splitlines()]
    rows = [r for r in rows if len(r["tools"]) == 1]
    held, train = [(r["query"], r["tools"][0]) for r in rows[::10]], [r for i, r in enumerate(rows) if i % 10]
    steps: list[Step] = []
    history: tuple[str, ...] = ()
    for i in range(calls):
        row = train[i % len(train)]
        position = i % 3
        history = () if position == 0 else history
        steps.append(Step(row["tools"][0], True, 120.0, query=row["query"], position=position, history=history))
        history = (*history, row["tools"][0])[-2:]
    return steps, held


def top1(learner: Learner, held: list[tuple[str, str]]) -> float:
    rng = np.random.default_rng(0)
    return float(np.mean([learner.recommend(q, rng, top_k=1).chosen == tool for q, tool in held]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", type=int, default=1_000)
    parser.add_argument("--calls", type=int, default=3_000)
    args = parser.parse_args()
    embedder = load_embedder("wordllama")
    docs = catalogue(args.tools)
    steps, held = stream(args.calls)
    print(f"{len(docs):,} tools, {len(steps):,} calls of BFCL live requests, {len(held)} held-out requests")
    zero = Learner(LearnerConfig(), docs, embedder)
    print(f"   {'before learning':48s}top-1 {top1(zero, held):.3f}")
    one = Learner(LearnerConfig(), docs, embedder)
    rng = np.random.default_rng(1)
    begin, cpu = time.perf_counter(), time.process_time()
    for step in steps:
        one.learn(step, rng)
    per_call = len(steps) / (time.perf_counter() - begin)
    per_cpu = len(steps) / (time.process_time() - cpu)
    print(
        f"   {'(a) one call at a time':29s}{per_call:8,.0f} calls/s ({per_cpu:,.0f} a CPU second)"
        f"   top-1 {top1(one, held):.3f}"
    )
    in_runs = in_runs_of(RUN, docs, embedder, steps, held, "(b) runs of")
    behind = in_runs_of(LEARN_RUN, docs, embedder, steps, held, "(c) behind: runs of")
    far = in_runs_of(CATCH_UP_RUN, docs, embedder, steps, held, "(d) far behind: runs of")
    print(
        f"runs learn {in_runs / per_call:.1f}× ({RUN}), {behind / per_call:.1f}× ({LEARN_RUN}) and "
        f"{far / per_call:.1f}× ({CATCH_UP_RUN}) as many calls a second as one at a time; target ≥ 5,000 calls/s"
    )


def in_runs_of(
    size: int,
    docs: list[ToolDoc],
    embedder: Embedder | None,
    steps: list[Step],
    held: list[tuple[str, str]],
    label: str,
) -> float:
    """Learn `steps` in runs of `size` calls; prints and returns the calls learned a second."""
    runs = Learner(LearnerConfig(), docs, embedder)
    rng = np.random.default_rng(1)
    begin, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(steps), size):
        runs.learn_many(StepColumns.of(steps[start : start + size]), rng)
    runs.settle()
    rate = len(steps) / (time.perf_counter() - begin)
    per_cpu = len(steps) / (time.process_time() - cpu)
    print(
        f"   {label + f' {size} calls':29s}{rate:8,.0f} calls/s ({per_cpu:,.0f} a CPU second)"
        f"   top-1 {top1(runs, held):.3f}"
    )
    return rate


if __name__ == "__main__":
    main()
