"""Trajectories with retries after failures: real LLM-agent conversations (bench/data/<set>/
trajectories.jsonl: each call in order, whether it failed, the user text it answered) replayed through
toolwise's MCP surface as the agent made them, next to simple references on the same stream.

The downstream (bench/catalogue_server.py) answers each call as it went: an error result where the
call failed. Before every step from the second `recommend_next_tools(session_id)` is asked (hit@1,
hit@3 of the tool the agent called next), and `recommend_tool(text)` where the step has a text (the
last column, on the same steps: the text-free references beside it are its references too). The
references learn online from the same calls in the same run: a Witten-Bell trigram over every call,
"repeat the last call" (then the calls before it, most recent first), a Witten-Bell trigram over the
calls that worked (what recommend_next_tools was before issue 34), and toolwise's own `SequenceModel`
fed each step with whether the call before it failed (`seq+flags`: the same model outside the MCP
surface; the learner passes that flag, so the two columns agree unless it loses one). Figures overall, right
after a failed call and right after one that worked; one row a seed (the order of the trajectories).

    python bench/retries.py [--data bench/data/tau_airline] [--seeds 0,1,2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from multistep import Hits, end_session, served
from references import WittenBell

from toolwise.learning.sessions import session_meta
from toolwise.rl import SequenceModel

HERE = Path(__file__).resolve().parent
NEXT = ("toolwise", "seq+flags", "trigram_all", "repeat_last", "trigram_worked")


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (path / "trajectories.jsonl").read_text().splitlines()]


def marks(ranked: Sequence[str], truth: str, prefix: str) -> dict[str, bool]:
    return {f"{prefix}1": list(ranked[:1]) == [truth], f"{prefix}3": truth in ranked[:3]}


async def toolwise_run(tools_file: Path, runs: list[dict[str, Any]], seed: int) -> tuple[Hits, dict[str, str], float]:
    """The stream through toolwise, steps 2+: recommend_next_tools' hits (`hit`) and recommend_tool's
    (`tool`; a step without a text counts as a miss); and its public name of each data-set tool."""
    hits = Hits()
    async with served(tools_file, seed) as (_, client, public):
        started = time.perf_counter()
        for i, run in enumerate(runs):
            session = f"trajectory-{i}"
            for j, step in enumerate(run["steps"]):
                truth = public[step["tool"]]
                picked: list[str] = []
                if step["text"]:
                    answer = await client.call_tool(
                        "recommend_tool", {"query": step["text"], "session_id": session, "top_k": 3}
                    )
                    picked = [r["tool"] for r in answer.structured_content["recommendations"]]
                if j:
                    answer = await client.call_tool("recommend_next_tools", {"session_id": session, "top_k": 3})
                    ranked = [r["tool"] for r in answer.structured_content["recommendations"]]
                    failed = not run["steps"][j - 1]["ok"]
                    hits.add(i, failed=failed, **marks(ranked, truth, "hit"), **marks(picked, truth, "tool"))
                expect = [step["tool"]] if step["ok"] else []  # the downstream fails the call as it failed
                result = await client.call_tool(truth, {"expect": expect}, meta=session_meta(session))
                if result.is_error == step["ok"]:
                    raise RuntimeError(
                        f"{truth} answered is_error={result.is_error}, the trajectory says ok={step['ok']}"
                    )
            outcome = "success" if run.get("reward", 0) >= 1 else "failure"
            await end_session(client, session, outcome)
        elapsed = time.perf_counter() - started
    return hits, public, elapsed


def references(runs: list[dict[str, Any]], names: list[str]) -> Hits:
    """The references on the same stream (steps 2+), each learning from the past calls only."""
    every, worked, flagged = WittenBell(names), WittenBell(names), SequenceModel()
    hits = Hits()
    for i, run in enumerate(runs):
        history: list[str] = []
        for j, step in enumerate(run["steps"]):
            truth = step["tool"]
            after_failure = j > 0 and not run["steps"][j - 1]["ok"]
            if j:
                ranked = {
                    "trigram_all": every.rank(history),
                    "repeat_last": list(dict.fromkeys(reversed(history))),
                    "trigram_worked": worked.rank(history),
                    "seq+flags": [
                        r.tool for r in flagged.recommend_next(history, top_k=3, after_failure=after_failure)
                    ],
                }
                hit = {f"{name}_{k}": v for name, r in ranked.items() for k, v in marks(r, truth, "hit").items()}
                hits.add(i, failed=after_failure, **hit)
            every.learn(history, truth)
            if step["ok"]:
                worked.learn(history, truth)
            flagged.observe_step(history, truth, 10.0 if step["ok"] else -5.0, step["ok"], after_failure=after_failure)
            history.append(truth)
    return hits


def rates(hits: Hits, name: str) -> tuple[float, float, float]:
    """Hit rate overall, right after a failed call, right after one that worked."""
    hit, failed = np.array(hits.marks[name]), np.array(hits.marks["failed"])
    return float(hit.mean()), float(hit[failed].mean()), float(hit[~failed].mean())


def key(name: str) -> str:
    return "hit" if name == "toolwise" else f"{name}_hit"


def table(name: str, per_seed: list[tuple[int, Hits, Hits]]) -> str:
    failed = int(np.sum(per_seed[0][1].marks["failed"]))
    steps = len(per_seed[0][1].marks["failed"])
    lines = [
        f"{name}: next-tool hit@3 (hit@1), {steps} steps 2+, {failed} right after a failed call",
        f"{'seed':>4} {'after':>7} | " + " ".join(f"{n:>14}" for n in NEXT) + " | " + f"{'recommend_tool':>14}",
    ]
    for seed, ours, refs in per_seed:
        for i, part in enumerate(("any", "failed", "worked")):
            row = f"{seed if i == 0 else '':>4} {part:>7} | "
            for n in NEXT:
                source = ours if n == "toolwise" else refs
                row += f"{rates(source, key(n) + '3')[i]:7.3f} ({rates(source, key(n) + '1')[i]:.3f})"
            row += f" | {rates(ours, 'tool3')[i]:7.3f} ({rates(ours, 'tool1')[i]:.3f})"
            lines.append(row)
    for i, part in enumerate(("any", "failed")):
        mean = [np.mean([rates(o if n == "toolwise" else r, key(n) + "3")[i] for _, o, r in per_seed]) for n in NEXT]
        mean.append(np.mean([rates(o, "tool3")[i] for _, o, _ in per_seed]))
        lines.append(f"{'mean':>4} {part:>7} | " + " ".join(f"{m:14.3f}" for m in mean[:-1]) + f" | {mean[-1]:14.3f}")
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[HERE / "data" / "tau_airline"])
    parser.add_argument("--seeds", default="0,1,2")
    args = parser.parse_args()
    for path in args.data:
        runs = load(path)
        steps = sum(len(r["steps"]) for r in runs)
        failures = sum(not s["ok"] for r in runs for s in r["steps"])
        print(f"\n{path.name}: {len(runs)} trajectories, {steps} calls, {failures} failed")
        per_seed = []
        for seed in (int(s) for s in args.seeds.split(",")):
            order = [runs[i] for i in np.random.default_rng(seed).permutation(len(runs))]
            ours, public, elapsed = await toolwise_run(path / "tools.jsonl", order, seed)
            print(f"  seed {seed}: {elapsed:.0f} s through the MCP surface ({elapsed / steps * 1000:.1f} ms a call)")
            named = [{**r, "steps": [{**s, "tool": public[s["tool"]]} for s in r["steps"]]} for r in order]
            per_seed.append((seed, ours, references(named, sorted(public.values()))))
        print(table(path.name, per_seed))


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    asyncio.run(main())
