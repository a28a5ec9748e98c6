"""Build the data sets of bench/real_queries.py from snapshots of their public repositories.

Each set becomes bench/data/<name>/tools.jsonl ({name, description, parameters}) and queries.jsonl
({id, query, tools: the right tool names}); a multi-step set also chains.jsonl ({id, steps: [{text,
tool}]}: the calls of one conversation in order, each with the user text it answered; its
queries.jsonl is each distinct text of a conversation as a request, the tools it led to as right).
Nothing is downloaded: pass the git directory of a clone.

    python bench/extract_data.py bfcl_live <gorilla git dir>        # ShishirPatil/gorilla (Apache-2.0, vendored)
    python bench/extract_data.py bfcl_multi_turn <gorilla git dir>  # the same repository, multi-turn
    python bench/extract_data.py bfcl_irrelevance <gorilla git dir> # the same repository, no right tool
    python bench/extract_data.py nestful <NESTFUL git dir>          # TathagataChakraborti/NESTFUL (Apache-2.0)
    python bench/extract_data.py ultratool <UltraTool git dir>      # JoeYing1019/UltraTool (no licence: git-ignored)
    python bench/extract_data.py toollens <COLT git dir>            # quchangle1/COLT (no licence: git-ignored)
    python bench/extract_data.py tau_airline <tau-bench git dir>    # sierra-research/tau-bench (MIT, vendored)
    python bench/extract_data.py seal_tools <Seal-Tools git dir>    # fairyshine/Seal-Tools (Apache-2.0)
    python bench/extract_data.py mcp_manager <MCP-Manager git dir>  # MCP servers' tools (no licence: git-ignored)

BFCL live: every `BFCL_v4_live_{simple,multiple,parallel,parallel_multiple}` entry (queries users
contributed), its functions pooled into one catalogue (first description of a name kept), the
request's last user message as the query, the functions of its ground truth as the right tools (and
as `calls`, with the first accepted value of each argument: bench/arguments.py). ToolLens: the test
split (qrels/test.tsv), each API of the corpus a tool named `tool_name: api_name`. BFCL multi-turn:
the `base`, `long_context` and `miss_param` conversations (a user turn, the calls that answer it,
the next turn…), the catalogue every multi_turn_func_doc class; each call's text is its turn's user
message. NESTFUL (data_v1): each request's nested calls in order, the request as every step's text.
UltraTool (English test set): each plan step that calls a tool, with its text. tau-bench: the
historical trajectories of an LLM agent (gpt-4o) serving simulated users of a domain (the airline: 50
tasks, 4 trials each), as trajectories.jsonl ({id, reward, steps: [{tool, ok, error: the kind of error
(its text with every token holding a digit as #) or null, text: the user message it answered}]}): a
call failed where its tool returned "Error: ..."; the catalogue is each tool module's `get_info()`.
Seal-Tools: its 4,076 generated tools as one catalogue, each request of its dev, in-domain and
out-of-domain test sets (its train set is in Git LFS) with the tools it calls as the right tools.
BFCL irrelevance: every `BFCL_v4_irrelevance` and `BFCL_v4_live_irrelevance` entry's last user message,
a request none of the functions it came with serves (queries.jsonl alone, `tools` empty, `given` those
functions, `set` its file: bench/unanswerable.py)."""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from extract_mcp import mcp_manager

HERE = Path(__file__).resolve().parent
BFCL = "berkeley-function-call-leaderboard/bfcl_eval/data"
BFCL_SETS = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")


def show(gitdir: Path, path: str) -> str:
    return subprocess.run(
        ["git", "-C", str(gitdir), "show", f"HEAD:{path}"], check=True, capture_output=True, text=True
    ).stdout


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def bfcl_live(gitdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tools: dict[str, dict[str, Any]] = {}
    queries = []
    for name in BFCL_SETS:
        answers = {
            a["id"]: a["ground_truth"] for a in lines(show(gitdir, f"{BFCL}/possible_answer/BFCL_v4_{name}.json"))
        }
        for entry in lines(show(gitdir, f"{BFCL}/BFCL_v4_{name}.json")):
            for fn in entry["function"]:
                tools.setdefault(
                    fn["name"],
                    {
                        "name": fn["name"],
                        "description": fn.get("description", ""),
                        "parameters": fn.get("parameters", {}),
                    },
                )
            users = [m["content"] for turn in entry["question"] for m in turn if m["role"] == "user"]
            right = sorted({next(iter(call)) for call in answers[entry["id"]]})
            calls = [
                {"tool": tool, "arguments": {k: v[0] for k, v in args.items() if v and v[0] != ""}}
                for call in answers[entry["id"]]
                for tool, args in call.items()
            ]
            queries.append({"id": entry["id"], "query": users[-1], "tools": right, "calls": calls})
    return list(tools.values()), queries


IRRELEVANCE = ("irrelevance", "live_irrelevance")


def bfcl_irrelevance(gitdir: Path) -> list[dict[str, Any]]:
    queries = []
    for name in IRRELEVANCE:
        for entry in lines(show(gitdir, f"{BFCL}/BFCL_v4_{name}.json")):
            users = [m["content"] for turn in entry["question"] for m in turn if m["role"] == "user"]
            if users and users[-1].strip():
                given = [fn["name"] for fn in entry["function"]]
                queries.append({"id": entry["id"], "query": users[-1], "tools": [], "set": name, "given": given})
    return queries


_FIELD = re.compile(r"(category_name|tool_name|api_name|api_description|required_params|optional_params):")


def toollens(gitdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    base = "datasets/ToolLens"
    names: dict[str, str] = {}
    tools = []
    for doc in lines(show(gitdir, f"{base}/corpus.jsonl")):
        parts = _FIELD.split(doc["text"])
        fields = {parts[i]: parts[i + 1].strip().rstrip(",").strip() for i in range(1, len(parts) - 1, 2)}
        params: dict[str, Any] = {}
        for key in ("required_params", "optional_params"):
            try:
                listed = json.loads(fields.get(key, "[]"))
            except json.JSONDecodeError:  # a few entries hold non-JSON lists: named in the output, tool kept
                print(f"ToolLens corpus {doc['_id']}: {key} is not JSON; the tool keeps its description alone")
                continue
            for p in listed:
                params[p["name"]] = {"type": "string", "description": p.get("description", "")}
        name = f"{fields.get('tool_name', '')}: {fields.get('api_name', '')}"
        names[doc["_id"]] = name
        tools.append(
            {"name": name, "description": fields.get("api_description", ""), "parameters": {"properties": params}}
        )
    texts = {q["_id"]: q["text"] for q in lines(show(gitdir, f"{base}/queries.jsonl"))}
    right: dict[str, set[str]] = defaultdict(set)
    for row in show(gitdir, f"{base}/qrels/test.tsv").splitlines()[1:]:
        query, corpus, _ = row.split("\t")
        right[query].add(names[corpus])
    queries = [{"id": q, "query": texts[q], "tools": sorted(t)} for q, t in right.items()]
    return tools, queries


Chains = tuple[list[dict[str, Any]], list[dict[str, Any]]]
BFCL_MULTI = ("multi_turn_base", "multi_turn_long_context", "multi_turn_miss_param")
_CALL = re.compile(r"\s*([A-Za-z_][\w.]*)\s*\(")


def bfcl_multi_turn(gitdir: Path) -> Chains:
    listing = subprocess.run(
        ["git", "-C", str(gitdir), "ls-tree", "--name-only", "HEAD", f"{BFCL}/multi_turn_func_doc/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    tools: dict[str, dict[str, Any]] = {}
    for path in sorted(listing):
        for fn in lines(show(gitdir, path)):
            tools.setdefault(fn["name"], {k: fn.get(k, "") for k in ("name", "description", "parameters")})
    chains = []
    for name in BFCL_MULTI:
        answers = {
            a["id"]: a["ground_truth"] for a in lines(show(gitdir, f"{BFCL}/possible_answer/BFCL_v4_{name}.json"))
        }
        for entry in lines(show(gitdir, f"{BFCL}/BFCL_v4_{name}.json")):
            steps = []
            for turn, calls in zip(entry["question"], answers[entry["id"]], strict=False):
                text = " ".join(m["content"] for m in turn if m["role"] == "user").strip()
                for call in calls:
                    found = _CALL.match(call)
                    if text and found and found.group(1) in tools:
                        steps.append({"text": text, "tool": found.group(1), "arguments": keyword_arguments(call)})
            if steps:
                chains.append({"id": entry["id"], "steps": steps})
    return list(tools.values()), chains


def keyword_arguments(call: str) -> dict[str, Any]:
    """The literal keyword arguments of a call written as Python (`cd(folder='document')`)."""
    try:
        node = ast.parse(call.strip(), mode="eval").body
    except SyntaxError:
        return {}
    if not isinstance(node, ast.Call):
        return {}
    found = {}
    for keyword in node.keywords:
        try:
            found[str(keyword.arg)] = ast.literal_eval(keyword.value)
        except ValueError:
            continue  # not a literal (an expression of earlier results): nothing to compare
    return found


def nestful(gitdir: Path) -> Chains:
    tools: dict[str, dict[str, Any]] = {}
    chains = []
    for part in ("executable/executable", "non-executable/non-executable-glaive", "non-executable/non-executable-sgd"):
        for spec in json.loads(show(gitdir, f"data_v1/{part}-spec.json")):
            listed = spec.get("query_parameters") or spec.get("parameters") or {}
            properties = {
                k: {"type": "string", "description": str(v.get("description", ""))} for k, v in listed.items()
            }
            required = sorted(k for k, v in listed.items() if v.get("required") is True)
            schema = {"type": "object", "properties": properties, "required": required}
            tools.setdefault(
                spec["name"], {"name": spec["name"], "description": spec.get("description", ""), "parameters": schema}
            )
        for i, entry in enumerate(json.loads(show(gitdir, f"data_v1/{part}-data.json"))):
            steps = [
                {"text": entry["input"], "tool": call["name"]} for call in entry["output"] if call["name"] in tools
            ]
            if steps:
                chains.append({"id": f"{part.split('/')[-1]}-{i}", "steps": steps})
    return list(tools.values()), chains


def ultratool(gitdir: Path) -> Chains:
    tools: dict[str, dict[str, Any]] = {}
    chains = []
    for i, entry in enumerate(lines(show(gitdir, "data/English-dataset/test.json"))):
        for tool in entry.get("tools", []):
            tools.setdefault(
                tool["name"],
                {"name": tool["name"], "description": tool.get("description", ""), "parameters": tool.get("arguments")},
            )
        steps = []
        for step in entry["plan"]:
            found = _CALL.match(step.get("tool") or "")
            if found and found.group(1) in tools:
                steps.append({"text": re.sub(r"^[\d.]+\s*", "", step["step"]), "tool": found.group(1)})
        if steps:
            chains.append({"id": f"ultratool-{i}", "steps": steps})
    return list(tools.values()), chains


TAU_ERROR = re.compile(r"\S*\d\S*")


def tau_bench(gitdir: Path, domain: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    listing = subprocess.run(
        ["git", "-C", str(gitdir), "ls-tree", "--name-only", "HEAD", f"tau_bench/envs/{domain}/tools/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    tools = [info for path in sorted(listing) if (info := tau_tool(show(gitdir, path))) is not None]
    known = {t["name"] for t in tools}
    trajectories = []
    for run in json.loads(show(gitdir, f"historical_trajectories/gpt-4o-{domain}.json")):
        text, steps = None, []
        for message in run["traj"]:
            if message["role"] == "user":
                text = message["content"]
            elif message["role"] == "tool" and message["name"] in known:
                failed = message["content"].startswith("Error")
                error = TAU_ERROR.sub("#", message["content"])[:120] if failed else None
                steps.append({"tool": message["name"], "ok": not failed, "error": error, "text": text})
        if steps:
            trajectories.append(
                {"id": f"{domain}-{run['task_id']}-{run['trial']}", "reward": run["reward"], "steps": steps}
            )
    return tools, trajectories


def tau_tool(source: str) -> dict[str, Any] | None:
    """The function a tau-bench tool module's `get_info()` returns (a literal dict), as a catalogue entry."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name == "get_info":
            returned = next(n for n in ast.walk(node) if isinstance(n, ast.Return))
            fn = ast.literal_eval(returned.value)["function"] if returned.value is not None else None
            return {k: fn.get(k, "") for k in ("name", "description", "parameters")} if fn else None
    return None


def seal_tools(gitdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tools = []
    for spec in lines(show(gitdir, "Seal-Tools_Dataset/tool.jsonl")):
        schema = {"type": "object", "properties": spec.get("parameters") or {}, "required": spec.get("required") or []}
        tools.append({"name": spec["api_name"], "description": spec.get("api_description", ""), "parameters": schema})
    known = {t["name"] for t in tools}
    queries = []
    for part in ("dev", "test_in_domain", "test_out_domain"):
        for entry in lines(show(gitdir, f"Seal-Tools_Dataset/{part}.jsonl")):
            right = sorted({c["api"] for c in entry["calling"] if c["api"] in known})
            if right:
                queries.append({"id": entry["id"], "query": entry["query"], "tools": right})
    return tools, queries


MULTI_STEP = {"bfcl_multi_turn": bfcl_multi_turn, "nestful": nestful, "ultratool": ultratool}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    single = ["bfcl_live", "bfcl_irrelevance", "toollens", "seal_tools", "tau_airline", "mcp_manager"]
    parser.add_argument("name", choices=[*single, *MULTI_STEP])
    parser.add_argument("gitdir", type=Path)
    args = parser.parse_args()
    out = HERE / "data" / args.name
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, list[dict[str, Any]]] = {}
    if args.name.startswith("tau_"):
        tools, trajectories = tau_bench(args.gitdir, args.name.removeprefix("tau_"))
        files = {"tools.jsonl": tools, "trajectories.jsonl": trajectories}
    elif args.name in MULTI_STEP:
        tools, chains = MULTI_STEP[args.name](args.gitdir)
        queries = []  # each distinct text of a conversation as one request; the tools it led to are right
        for c in chains:
            right: dict[str, set[str]] = {}
            for step in c["steps"]:
                right.setdefault(step["text"], set()).add(step["tool"])
            queries += [
                {"id": f"{c['id']}-{i}", "query": t, "tools": sorted(r)} for i, (t, r) in enumerate(right.items())
            ]
        files = {"tools.jsonl": tools, "queries.jsonl": queries, "chains.jsonl": chains}
    elif args.name == "bfcl_irrelevance":
        files = {"queries.jsonl": bfcl_irrelevance(args.gitdir)}
    else:
        extract = {"bfcl_live": bfcl_live, "toollens": toollens, "seal_tools": seal_tools, "mcp_manager": mcp_manager}
        tools, queries = extract[args.name](args.gitdir)
        files = {"tools.jsonl": tools, "queries.jsonl": queries}
    for filename, rows in files.items():
        (out / filename).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{out}: " + ", ".join(f"{len(rows)} {name.split('.')[0]}" for name, rows in files.items()))


if __name__ == "__main__":
    main()
