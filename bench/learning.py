"""Learning benchmark: cumulative regret and online accuracy of every policy on synthetic catalogues.

1. Multi-step: K = 50 tools, 20 task types, each with its own query words plus noise words, hidden
   success probabilities and latencies per (task, tool), 3-step episodes in which the good next tool
   depends on the previous one. Regret = best expected reward − expected reward of the choice.
2. Paraphrase: 200 tools with names and one-line descriptions; every query asks for one tool in
   words of which only some appear in its description, mixed with noise, never repeated verbatim.
   Online accuracy = how often the chosen tool is the right one, against lexical relevance alone.

Also: decisions/s and updates/s at K = 50, d = 256, and the memory of the policy state after 100k
distinct (context, tool) pairs.

4. The multi-step catalogue through toolwise's MCP surface, as an agent drives it (in-process
   `mcp.Client`, default settings, the catalogue served by bench/catalogue_server.py, the call's
   outcome drawn from the hidden success probability): the tagged flow (calls carry
   `_meta["toolwise/session_id"]`) and the agent-framework flow (`session_id` on our tools only,
   plain calls), against a reference per-tool LinUCB over one-hot query words + step + previous tool.

    python bench/learning.py [--steps 20000] [--seeds 3] [--mcp-steps 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import string
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toolwise.rl import POLICIES, Learner, LearnerConfig, RewardWeights, Step, ToolDoc
from toolwise.rl.reward import normalise

WEIGHTS = RewardWeights()
HERE = Path(__file__).resolve().parent


def words(rng: np.random.Generator, n: int) -> list[str]:
    letters = np.array(list(string.ascii_lowercase))
    out: set[str] = set()
    while len(out) < n:
        out.add("".join(rng.choice(letters, size=int(rng.integers(4, 8)))))
    return sorted(out)


def expected_reward(p: np.ndarray, latency: np.ndarray) -> np.ndarray:
    return p * WEIGHTS.success + (1 - p) * WEIGHTS.failure - WEIGHTS.latency_per_second * latency


@dataclass
class MultiStep:
    tools: list[ToolDoc]
    task_words: list[list[str]]
    noise: list[str]
    base: np.ndarray  # (tasks, tools) success probability of an ordinary choice
    first: np.ndarray  # (tasks,) good first tool
    follow: np.ndarray  # (tools,) good next tool after each previous tool
    latency: np.ndarray  # (tasks, tools) seconds
    steps: int = 3

    @classmethod
    def make(cls, rng: np.random.Generator, k: int = 50, tasks: int = 20) -> MultiStep:
        vocab = words(rng, tasks * 6 + 300 + k * 3)
        task_words = [vocab[i * 6 : (i + 1) * 6] for i in range(tasks)]
        noise = vocab[tasks * 6 : tasks * 6 + 300]
        tool_words = vocab[tasks * 6 + 300 :]
        first = rng.integers(k, size=tasks)
        descriptions = [" ".join(tool_words[i * 3 : (i + 1) * 3]) for i in range(k)]
        for t, g in enumerate(first):  # the good first tool's description names two of its task's words
            descriptions[g] += " " + " ".join(task_words[t][:2])
        tools = [ToolDoc(f"srv__{tool_words[i * 3]}", descriptions[i]) for i in range(k)]
        return cls(
            tools,
            task_words,
            noise,
            rng.uniform(0.05, 0.35, (tasks, k)),
            first,
            rng.integers(k, size=k),
            rng.uniform(0.1, 4.0, (tasks, k)),
        )

    def query(self, rng: np.random.Generator, task: int) -> str:
        picked = list(rng.choice(self.task_words[task], 3, replace=False)) + list(rng.choice(self.noise, 2))
        return " ".join(rng.permutation(picked))

    def success_p(self, task: int, step: int, previous: int | None) -> np.ndarray:
        p: np.ndarray = self.base[task].copy()
        good = self.first[task] if step == 0 or previous is None else self.follow[previous]
        p[good] = 0.9
        return p


@dataclass
class Paraphrase:
    tools: list[ToolDoc]
    user_words: list[list[str]]
    noise: list[str]

    @classmethod
    def make(cls, rng: np.random.Generator, k: int = 200) -> Paraphrase:
        vocab = words(rng, k * 10 + 400 + 300)
        shared = vocab[k * 10 : k * 10 + 400]  # description words several tools have in common
        noise = vocab[k * 10 + 400 :]
        tools, user_words = [], []
        for i in range(k):
            own = vocab[i * 10 : (i + 1) * 10]
            # name + description: 2 of the tool's own words and 4 shared ones; users say 8 own words
            description = " ".join([own[0], own[1], *rng.choice(shared, 4)])
            tools.append(ToolDoc(f"srv__{own[0]}_{own[1]}", description))
            user_words.append([own[0], *own[2:9]])
        return cls(tools, user_words, noise)

    def query(self, rng: np.random.Generator, tool: int) -> str:
        picked = list(rng.choice(self.user_words[tool], 3, replace=False)) + list(rng.choice(self.noise, 2))
        return " ".join(rng.permutation(picked))


def run_multistep(env: MultiStep, policy: str, seed: int, steps: int) -> float:
    rng = np.random.default_rng(seed)
    learner = Learner(LearnerConfig(policy=policy if policy in POLICIES else "ucb"), env.tools)
    names = [t.name for t in env.tools]
    regret, t = 0.0, 0
    while t < steps:
        task = int(rng.integers(len(env.task_words)))
        query, previous, history = env.query(rng, task), None, list[str]()
        for s in range(env.steps):
            p = env.success_p(task, s, None if previous is None else names.index(previous))
            exp = expected_reward(p, env.latency[task])
            if policy == "random":
                arm = int(rng.integers(len(names)))
            elif policy == "oracle":
                arm = int(exp.argmax())
            else:
                d = learner.recommend(query, rng, previous_tool=previous, position=s)
                arm = names.index(d.chosen)
            regret += float(exp.max() - exp[arm])
            success = bool(rng.random() < p[arm])
            latency = float(env.latency[task, arm] * rng.lognormal(0, 0.2))
            if policy in POLICIES:
                learner.learn(
                    Step(
                        names[arm],
                        success,
                        latency * 1000,
                        query,
                        previous,
                        s,
                        tuple(history),
                        terminal=s == env.steps - 1,
                    ),
                    rng,
                )
            previous = names[arm]
            history.append(previous)
            t += 1
            if t >= steps:
                break
    return regret


def run_paraphrase(env: Paraphrase, policy: str, seed: int, steps: int) -> tuple[float, float]:
    """Online accuracy over all steps and over the last quarter."""
    rng = np.random.default_rng(seed)
    learner = Learner(LearnerConfig(policy=policy if policy in POLICIES else "ucb"), env.tools)
    names = [t.name for t in env.tools]
    hits = np.zeros(steps, dtype=bool)
    for t in range(steps):
        target = int(rng.integers(len(names)))
        query = env.query(rng, target)
        if policy == "lexical":
            arm = int(learner.index.lexical.scores(query).argmax())
        else:
            arm = names.index(learner.recommend(query, rng).chosen)
        hits[t] = arm == target
        if policy in POLICIES:
            success = bool(rng.random() < (0.9 if arm == target else 0.05))
            learner.learn(Step(names[arm], success, 500.0, query, terminal=True), rng)
    return float(hits.mean()), float(hits[-steps // 4 :].mean())


def throughput(policy: str, seed: int = 0, n: int = 2_000, passes: int = 7) -> tuple[list[float], list[float]]:
    """Decisions/s and updates/s of each of `passes` passes over `n` new queries (a query never seen
    before, so no memo helps; the machine is shared, so the caller reports median and best)."""
    rng = np.random.default_rng(seed)
    env = MultiStep.make(rng)
    learner = Learner(LearnerConfig(policy=policy), env.tools)
    names = [t.name for t in env.tools]
    decisions, updates = [], []
    for _ in range(passes):
        queries = [env.query(rng, int(rng.integers(20))) for _ in range(n)]
        start = time.perf_counter()
        for i, q in enumerate(queries):
            learner.recommend(q, rng, previous_tool=names[i % 50], position=i % 3)
        decisions.append(n / (time.perf_counter() - start))
        steps = [Step(names[i % 50], i % 3 != 0, 300.0, q, names[(i + 1) % 50], i % 3) for i, q in enumerate(queries)]
        start = time.perf_counter()
        for step in steps:
            learner.learn(step, rng)
        updates.append(n / (time.perf_counter() - start))
    return decisions, updates


def memory_after_pairs(policy: str, pairs: int = 100_000, k: int = 50) -> int:
    rng = np.random.default_rng(0)
    tools = [ToolDoc(f"srv__t{i}", "") for i in range(k)]
    learner = Learner(LearnerConfig(policy=policy), tools)
    for i in range(pairs):
        learner.learn(Step(f"srv__t{i % k}", True, 100.0, f"query number {i // k}", terminal=True), rng)
    return learner.nbytes()


def episodes(env: MultiStep, rng: np.random.Generator, steps: int):  # type: ignore[no-untyped-def]
    """(task, query, step) in episode order until `steps` steps."""
    t = 0
    while t < steps:
        task = int(rng.integers(len(env.task_words)))
        query = env.query(rng, task)
        for s in range(env.steps):
            if t >= steps:
                return
            yield task, query, s
            t += 1


def run_multistep_reference(env: MultiStep, seed: int, steps: int, checkpoints: list[int]) -> list[float]:
    """Per-tool LinUCB (full precision, α = 0.5) over one-hot query words + step + previous tool, learning
    the normalised reward − ½."""
    rng = np.random.default_rng(seed)
    vocab = {w: i for i, w in enumerate(sorted({w for ws in env.task_words for w in ws} | set(env.noise)))}
    k = len(env.tools)
    d = len(vocab) + env.steps + k + 1
    a_inv, b, theta = np.repeat(np.eye(d)[None], k, 0), np.zeros((k, d)), np.zeros((k, d))
    regret, out, previous = 0.0, [], None
    for t, (task, query, s) in enumerate(episodes(env, rng, steps), start=1):
        previous = None if s == 0 else previous
        x = np.zeros(d)
        x[[vocab[w] for w in query.split()]] = 1
        x[len(vocab) + s] = 1
        x[len(vocab) + env.steps + (k if previous is None else previous)] = 1
        x /= np.linalg.norm(x)
        arm = int((theta @ x + 0.5 * np.sqrt((a_inv @ x) @ x)).argmax())
        p = env.success_p(task, s, previous)
        exp = expected_reward(p, env.latency[task])
        regret += float(exp.max() - exp[arm])
        success = bool(rng.random() < p[arm])
        latency = float(env.latency[task, arm] * rng.lognormal(0, 0.2))
        reward = normalise(WEIGHTS, (WEIGHTS.success if success else WEIGHTS.failure) - 0.1 * latency)
        ax = a_inv[arm] @ x
        a_inv[arm] -= np.outer(ax, ax) / (1 + x @ ax)
        b[arm] += (reward - 0.5) * x  # centred: a failure (0.25 normalised) must lower the estimate
        theta[arm] = a_inv[arm] @ b[arm]
        previous = arm
        if t in checkpoints:
            out.append(regret)
    return out


async def run_multistep_mcp(env: MultiStep, flow: str, seed: int, steps: int, checkpoints: list[int]) -> list[float]:
    """toolwise through its MCP surface: recommend_tool, call the top pick, end_session per episode."""
    from mcp import Client

    from toolwise.config import AppConfig
    from toolwise.learning.sessions import session_meta
    from toolwise.server.app import Toolwise
    from toolwise.server.build import build_server

    rng = np.random.default_rng(seed)
    names = [t.name for t in env.tools]
    regret, out = 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        tools_file = Path(tmp) / "tools.jsonl"
        tools_file.write_text(
            "".join(
                json.dumps({"name": n.split("__", 1)[1], "description": t.description}) + "\n"
                for n, t in zip(names, env.tools, strict=True)
            )
        )
        downstream = {"command": sys.executable, "args": [str(HERE / "catalogue_server.py"), str(tools_file)]}
        settings = {
            "database_url": f"sqlite+aiosqlite:///{Path(tmp) / 'toolwise.db'}",
            "seed": seed,
            "snapshot_interval_s": 0,
        }
        config = AppConfig.model_validate({"mcpServers": {"srv": downstream}, "toolwise": settings})
        # the handshake era: in-process, the client then has a connection, as over stdio in either era
        async with Toolwise(config) as app, Client(build_server(app), mode="legacy") as client:
            session, previous = "", None
            for t, (task, query, s) in enumerate(episodes(env, rng, steps), start=1):
                if s == 0:
                    session, previous = f"conversation-{uuid.uuid4().hex[:12]}", None
                rec = await client.call_tool("recommend_tool", {"query": query, "session_id": session})
                arm = names.index(rec.structured_content["recommendations"][0]["tool"])
                p = env.success_p(task, s, previous)
                exp = expected_reward(p, env.latency[task])
                regret += float(exp.max() - exp[arm])
                success = bool(rng.random() < p[arm])
                meta = session_meta(session) if flow == "tagged" else None
                expect = [names[arm].split("__", 1)[1]] if success else []
                await client.call_tool(names[arm], {"expect": expect}, meta=meta)
                previous = arm
                if s == env.steps - 1 or t == steps:
                    await client.call_tool(
                        "end_session", {"session_id": session, "outcome": "success" if success else "failure"}
                    )
                if t in checkpoints:
                    out.append(regret)
    return out


def mcp_section(steps: int, seed: int = 0) -> None:
    checkpoints = sorted({c for c in (3_000, steps) if c <= steps})
    env = MultiStep.make(np.random.default_rng(100 + seed))
    print(f"\n4. multi-step catalogue through the MCP surface, seed {seed}: cumulative regret at T = {checkpoints}")
    rows: dict[str, list[float]] = {}
    for policy in ("random", "ucb"):
        rows[policy if policy == "random" else "ucb (design card's selector, in-process)"] = [
            run_multistep(env, policy, seed, c) for c in checkpoints
        ]
    rows["reference LinUCB (one-hot words + step + previous tool)"] = run_multistep_reference(
        env, seed, steps, checkpoints
    )
    for flow in ("tagged", "framework"):
        label = "toolwise, tagged calls" if flow == "tagged" else "toolwise, agent-framework flow"
        rows[label] = asyncio.run(run_multistep_mcp(env, flow, seed, steps, checkpoints))
    reference = rows["reference LinUCB (one-hot words + step + previous tool)"]
    for label, values in rows.items():
        cells = "  ".join(f"{v:10,.0f} ({v / r:4.2f}× ref)" for v, r in zip(values, reference, strict=True))
        print(f"   {label:<56} {cells}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--mcp-steps", type=int, default=10_000, help="section 4's T (0: skip it)")
    parser.add_argument("--only-mcp", action="store_true", help="run section 4 alone")
    args = parser.parse_args()
    if args.only_mcp:
        mcp_section(args.mcp_steps)
        return
    seeds = range(args.seeds)
    ours = [p for p in POLICIES if p != "ucb"]

    print(f"1. multi-step catalogue: K=50, 20 task types, 3-step episodes; cumulative regret at T={args.steps:,}")
    regret: dict[str, list[float]] = {}
    for policy in ["random", "ucb", *ours, "oracle"]:
        regret[policy] = [
            run_multistep(MultiStep.make(np.random.default_rng(100 + s)), policy, s, args.steps) for s in seeds
        ]
        label = {"ucb": "ucb (design card: tabular UCB1+ε, Q-learning)"}.get(policy, policy)
        print(
            f"   {label:<48} "
            + "  ".join(f"{r:10,.0f}" for r in regret[policy])
            + f"   mean {np.mean(regret[policy]):10,.0f}"
        )
    best = min(ours, key=lambda p: np.mean(regret[p]))
    ratio = np.mean(regret[best]) / np.mean(regret["ucb"])
    print(f"   best ours = {best}; regret ratio best/tabular = {ratio:.3f}  (target ≤ 0.5)")

    print(f"\n2. paraphrase catalogue: 200 tools, queries never repeated; online accuracy at T={args.steps:,}")
    accuracy: dict[str, list[tuple[float, float]]] = {}
    for policy in ["lexical", "ucb", *ours]:
        accuracy[policy] = [
            run_paraphrase(Paraphrase.make(np.random.default_rng(200 + s)), policy, s, args.steps) for s in seeds
        ]
        overall = np.mean([a for a, _ in accuracy[policy]])
        last = np.mean([b for _, b in accuracy[policy]])
        print(f"   {policy:<12} accuracy {overall:6.1%}   last quarter {last:6.1%}")

    print("\n3. speed at K=50, d=256 and memory after 100k distinct (context, tool) pairs")
    print("   (7 passes of 2,000 never-seen queries each: median and best pass; target ≥ 20,000/s each)")
    for policy in POLICIES:
        decisions, updates = throughput(policy)
        mb = memory_after_pairs(policy) / 1e6
        print(
            f"   {policy:<10} decisions/s {np.median(decisions):8,.0f} (best {max(decisions):8,.0f})"
            f"   updates/s {np.median(updates):8,.0f} (best {max(updates):8,.0f})   {mb:7.2f} MB state"
        )
    if args.mcp_steps:
        mcp_section(args.mcp_steps)


if __name__ == "__main__":
    main()
