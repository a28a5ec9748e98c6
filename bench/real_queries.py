"""Right first time on real requests: toolwise through its MCP surface against zero-shot and learning
references, on a real tool-selection data set (bench/data/<set>/: tools.jsonl, queries.jsonl).

One online run over the requests in a fixed shuffled order (`--passes` > 1 repeats them, reshuffled,
as users repeat requests): each method names one tool per request, the call succeeds only if it is
one of the request's right tools, and the method may learn from that outcome. Methods:

1. TF-IDF zero-shot: cosine of TF-IDF vectors, query vs tool document.
2. Embedding zero-shot: cosine of WordLlama embeddings (the semantic prior alone).
3. Reference: embedding prior + per-tool LinUCB (full 256×256 precision per tool) learning the
   residual reward − cosine; a short numpy loop.
4. toolwise, driven exactly as an agent would: an in-process `mcp.Client` on toolwise (default
   settings, a throwaway SQLite file), a fake downstream serving the catalogue
   (bench/catalogue_server.py), `recommend_tool(query)`, call the top pick, `end_session`; in the
   tagged flow (the call carries `_meta["toolwise/session_id"]`) and the agent-framework flow
   (`session_id` on our tools only, the call plain).

Also: `recommend_tool` p50 at 1,000 tools (the catalogue padded with renamed copies) with the
semantic prior against the lexical one in the same run, the same round trip without the client's check of the
answer against the tool's output schema (the Python SDK's client validates with jsonschema, pure Python, at
about 40% of the round trip's instructions; a client with a compiled validator, as the TypeScript SDK's ajv,
waits for the rest), and the policy state's memory at 1,000 tools against a full per-tool 256×256 matrix.

    python bench/real_queries.py [--data bench/data/bfcl_live] [--passes 3] [--seed 0] [--speed-only]

`--callgrind` counts the instructions of the round trips instead of timing them (which on a shared machine
moves with the load): callgrind's instrumentation is switched on around the measured ones only (semantic
prior), and `callgrind_annotate` of its file says how many; divide by `--speed-queries` less the 50 warm-up:

    TOKENIZERS_PARALLELISM=false OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind --instr-atstart=no \
        python bench/real_queries.py --speed-only --callgrind --speed-queries 150
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from mcp.client.session import ClientSession

from toolwise.config import AppConfig
from toolwise.learning.embedding import WordLlamaEmbedder, tool_document
from toolwise.learning.sessions import session_meta
from toolwise.rl.policies import OutcomeModel
from toolwise.rl.text import tokenize
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

HERE = Path(__file__).resolve().parent
SERVER = "cat"  # the fake downstream's name: toolwise serves its tools as cat__<tool> (cleaned)


@dataclass(frozen=True)
class Request:
    query: str
    right: frozenset[str]


@dataclass(frozen=True)
class DataSet:
    path: Path
    tools: list[dict[str, Any]]
    requests: list[Request]

    @classmethod
    def load(cls, path: Path) -> DataSet:
        tools_file, queries_file = path / "tools.jsonl", path / "queries.jsonl"
        if not tools_file.exists() or not queries_file.exists():
            sys.exit(f"data set missing: {tools_file} and {queries_file} are needed (see README, 'Real requests')")
        tools = [json.loads(line) for line in tools_file.read_text().splitlines()]
        requests = [
            Request(q["query"], frozenset(q["tools"])) for q in map(json.loads, queries_file.read_text().splitlines())
        ]
        return cls(path, tools, requests)

    def documents(self) -> list[str]:
        return [tool_document(t["name"], None, t.get("description"), t.get("parameters")) for t in self.tools]


def stream(data: DataSet, passes: int, seed: int) -> list[Request]:
    rng = np.random.default_rng(seed)
    return [data.requests[i] for _ in range(passes) for i in rng.permutation(len(data.requests))]


# -- references ------------------------------------------------------------------------------------


def tfidf(documents: list[str]) -> Callable[[str], np.ndarray]:
    docs = [Counter(tokenize(d)) for d in documents]
    vocabulary = {t: i for i, t in enumerate(sorted({t for d in docs for t in d}))}
    df = np.zeros(len(vocabulary))
    for d in docs:
        for t in d:
            df[vocabulary[t]] += 1
    idf = np.log((1 + len(docs)) / (1 + df)) + 1

    def vector(counts: Counter[str]) -> np.ndarray:
        v = np.zeros(len(vocabulary))
        for t, c in counts.items():
            if t in vocabulary:
                v[vocabulary[t]] = (1 + math.log(c)) * idf[vocabulary[t]]
        n = np.linalg.norm(v)
        return v / n if n else v

    matrix = np.stack([vector(d) for d in docs])
    return lambda query: matrix @ vector(Counter(tokenize(query)))


def zero_shot(requests: list[Request], names: list[str], scores: Callable[[str], np.ndarray]) -> np.ndarray:
    return np.array([names[int(scores(r.query).argmax())] in r.right for r in requests], dtype=float)


def linucb_residual(
    requests: list[Request], names: list[str], tools: np.ndarray, embed: Callable[[str], np.ndarray], alpha: float = 0.1
) -> np.ndarray:
    """Per-tool LinUCB on the query embedding learning reward − cosine, full precision per tool."""
    n, d = tools.shape
    a_inv = np.repeat(np.eye(d)[None], n, 0)
    b = np.zeros((n, d))
    theta = np.zeros((n, d))
    hits = []
    for r in requests:
        x = embed(r.query)
        cos = tools @ x
        mean = cos + theta @ x
        top = np.argpartition(-mean, 20)[:20]
        width = np.sqrt(np.einsum("i,tij,j->t", x, a_inv[top], x))
        score = mean.copy()
        score[top] += alpha * width
        arm = int(score.argmax())
        reward = float(names[arm] in r.right)
        hits.append(reward)
        ax = a_inv[arm] @ x
        a_inv[arm] -= np.outer(ax, ax) / (1 + x @ ax)
        b[arm] += (reward - cos[arm]) * x
        theta[arm] = a_inv[arm] @ b[arm]
    return np.array(hits)


# -- toolwise through MCP --------------------------------------------------------------------------


# serving waits for the catalogue server however loaded the machine: with the default 5 s a slow start served
# without it, so every data-set tool was unknown to the bench (a KeyError in multistep.py's names)
START_WAIT_S = 600.0


def config(tools_file: Path, db: Path, seed: int, **settings: object) -> AppConfig:
    """toolwise over bench/catalogue_server.py serving `tools_file` as `cat`, on database `db` (the benches'
    one config: real_queries, multistep, discovery and the scripts importing them)."""
    downstream = {"command": sys.executable, "args": [str(HERE / "catalogue_server.py"), str(tools_file)]}
    toolwise = {"database_url": f"sqlite+aiosqlite:///{db}", "seed": seed, "snapshot_interval_s": 0,
                "start_wait_s": START_WAIT_S, "start_timeout_s": START_WAIT_S, **settings}  # fmt: skip
    return AppConfig.model_validate({"mcpServers": {SERVER: downstream}, "toolwise": toolwise})


async def toolwise_run(
    tools_file: Path, requests: list[Request], flow: str, seed: int, settings: dict[str, object]
) -> np.ndarray:
    hits = []
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            Toolwise(config(tools_file, Path(tmp) / "toolwise.db", seed, **settings)) as app,
            # the handshake era: in-process, the client then has a connection, as over stdio in either era
            # (a 2026-07-28 in-process or HTTP client has none: only `_meta` can tie its calls to decisions)
            Client(build_server(app), mode="legacy") as client,
        ):
            for r in requests:
                session = f"conversation-{uuid.uuid4().hex[:12]}"
                rec = await client.call_tool("recommend_tool", {"query": r.query, "session_id": session})
                pick = rec.structured_content["recommendations"][0]["tool"]
                expect = sorted(r.right)  # the downstream judges by its own tool names
                meta = session_meta(session) if flow == "tagged" else None
                result = await client.call_tool(pick, {"expect": expect}, meta=meta)
                hits.append(0.0 if result.is_error else 1.0)
                outcome = "failure" if result.is_error else "success"
                ended = await client.call_tool("end_session", {"session_id": session, "outcome": outcome})
                if ended.is_error:
                    raise RuntimeError(f"end_session failed: {ended.content}")
    return np.array(hits)


async def recommend_latency(
    tools_file: Path, queries: list[str], embedding: str, *, callgrind: bool = False, validate: bool = True
) -> tuple[float, float, float]:
    """p50 and p90 (ms) of recommend_tool round trips through the in-process client, and the p50 of the
    CPU time the round trip took on the event loop's thread (client and server: all of it runs there),
    which other work on a shared machine moves far less than the wall time. `callgrind`: callgrind's
    instrumentation on from the first timed call to the last (the process runs under valgrind). `validate`
    False: the client does not check the answers against the output schema (`unvalidated`)."""
    times, cpu = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(tools_file, Path(tmp) / "toolwise.db", 0, embedding=embedding)
        checks = contextlib.nullcontext() if validate else unvalidated()
        async with Toolwise(cfg) as app, Client(build_server(app), mode="legacy") as client:
            with checks:
                for i, q in enumerate(queries):
                    if callgrind and i == 50:
                        instrument("on")
                    begin, begin_cpu = time.perf_counter(), time.thread_time()
                    await client.call_tool("recommend_tool", {"query": q, "session_id": f"s{i % 50}"})
                    times.append((time.perf_counter() - begin) * 1000)
                    cpu.append((time.thread_time() - begin_cpu) * 1000)
            if callgrind:
                instrument("off")
    warm = np.array(times[50:])
    return float(np.percentile(warm, 50)), float(np.percentile(warm, 90)), float(np.percentile(cpu[50:], 50))


@contextlib.contextmanager
def unvalidated() -> Iterator[None]:
    """The SDK client's check of a tool's answer against its output schema skipped meanwhile (a bench's patch)."""
    check = ClientSession.validate_tool_result

    async def skipped(self: ClientSession, name: str, result: object) -> None:
        return None

    ClientSession.validate_tool_result = skipped  # type: ignore[method-assign]
    try:
        yield
    finally:
        ClientSession.validate_tool_result = check  # type: ignore[method-assign]


def instrument(switch: str) -> None:
    """callgrind's instrumentation of this process on or off (`callgrind_control`, valgrind's)."""
    subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True)


def padded_catalogue(data: DataSet, size: int, path: Path) -> None:
    """`size` tools: the data set's, then renamed copies (same documents) until there are enough."""
    lines = [json.dumps(t) for t in data.tools]
    copy = 0
    while len(lines) < size:
        for t in data.tools[: size - len(lines)]:
            lines.append(json.dumps({**t, "name": f"{t['name']}_copy{copy}"}))
        copy += 1
    path.write_text("\n".join(lines) + "\n")


# -- report ----------------------------------------------------------------------------------------


def table(results: dict[str, np.ndarray], checkpoints: list[int], per_pass: int) -> str:
    head = "| method | " + " | ".join(f"{c:,}" for c in checkpoints) + " | last pass alone |"
    rows = [head, "|---" * (len(checkpoints) + 2) + "|"]
    for name, hits in results.items():
        cells = [f"{100 * hits[:c].mean():.1f}%" for c in checkpoints]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {100 * hits[-per_pass:].mean():.1f}% |")
    return "\n".join(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE / "data" / "bfcl_live")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flows", default="tagged,framework")
    parser.add_argument("--speed-tools", type=int, default=1_000)
    parser.add_argument("--settings", default="{}", help="toolwise settings as JSON (default: its defaults)")
    parser.add_argument("--speed-only", action="store_true", help="only recommend_tool's latency at --speed-tools")
    parser.add_argument("--speed-queries", type=int, default=600, help="recommend_tool calls timed (the first 50 warm)")
    parser.add_argument("--callgrind", action="store_true", help="run under callgrind: instrument the timed calls only")
    args = parser.parse_args()
    data = DataSet.load(args.data)
    requests = stream(data, args.passes, args.seed)
    names = [t["name"] for t in data.tools]
    print(
        f"{data.path.name}: {len(names)} tools, {len(data.requests)} requests × {args.passes} passes, seed {args.seed}"
    )

    if not args.speed_only:
        await accuracy(args, data, requests, names)
    await speed(args, data)


async def accuracy(args: argparse.Namespace, data: DataSet, requests: list[Request], names: list[str]) -> None:
    """Right first time of each method over the stream, as a table."""
    embedder = WordLlamaEmbedder()
    tools = embedder.embed(data.documents()).astype(np.float64)
    memo: dict[str, np.ndarray] = {}

    def embed(query: str) -> np.ndarray:
        if query not in memo:
            memo[query] = embedder.embed([query])[0].astype(np.float64)
        return memo[query]

    results: dict[str, np.ndarray] = {}
    started = time.perf_counter()
    results["TF-IDF zero-shot"] = zero_shot(requests, names, tfidf(data.documents()))
    results["embedding zero-shot (wordllama)"] = zero_shot(requests, names, lambda q: tools @ embed(q))
    results["embedding + per-tool LinUCB residual (reference)"] = linucb_residual(requests, names, tools, embed)
    print(f"references: {time.perf_counter() - started:.0f} s")
    for flow in args.flows.split(","):
        started = time.perf_counter()
        label = "tagged calls" if flow == "tagged" else "agent-framework flow"
        results[f"toolwise recommend_tool ({label})"] = await toolwise_run(
            data.path / "tools.jsonl", requests, flow, args.seed, json.loads(args.settings)
        )
        print(f"toolwise, {flow}: {time.perf_counter() - started:.0f} s")
    n = len(data.requests)
    checkpoints = sorted(
        {c for c in (250, 500, 1_000, 5_000) if c < len(requests)} | {n * p for p in range(1, args.passes + 1)}
    )
    print("\nright first time, cumulative over the first N requests:\n")
    print(table(results, checkpoints, n))


async def speed(args: argparse.Namespace, data: DataSet) -> None:
    """recommend_tool's round trip at `--speed-tools` tools, semantic prior against lexical, and memory."""
    with tempfile.TemporaryDirectory() as tmp:
        padded = Path(tmp) / "tools.jsonl"
        padded_catalogue(data, args.speed_tools, padded)
        queries = [r.query for r in data.requests[: args.speed_queries]]
        semantic = await recommend_latency(padded, queries, "wordllama", callgrind=args.callgrind)
        if args.callgrind:
            print("callgrind: instructions of the last", len(queries) - 50, "round trips (semantic prior) counted")
            return
        lexical = await recommend_latency(padded, queries, "none")
        unchecked = await recommend_latency(padded, queries, "wordllama", validate=False)
    print(f"\nrecommend_tool round trip at {args.speed_tools:,} tools (in-process client, new query each call):")
    rows = (
        ("semantic prior (default)", semantic),
        ("lexical prior (reference)", lexical),
        ("semantic prior, the answer not checked against its output schema by the client", unchecked),
    )
    for name, (p50, p90, cpu) in rows:
        print(f"  {name}: p50 {p50:.2f} ms, p90 {p90:.2f} ms; CPU p50 {cpu:.2f} ms")
    policy = OutcomeModel()  # the default policy, grown to the catalogue as its first calls of each tool grow it
    policy.choice._ensure(args.speed_tools - 1)
    policy.memory._ensure(args.speed_tools - 1)
    print(
        f"\npolicy state at {args.speed_tools:,} tools: {policy.nbytes() / 1e6:.1f} MB "
        f"(a full 256×256 float64 matrix per tool: {args.speed_tools * 256 * 256 * 8 / 1e6:.0f} MB)"
    )


if __name__ == "__main__":
    asyncio.run(main())
