"""Build the data sets of bench/real_queries.py from snapshots of their public repositories.

Each set becomes bench/data/<name>/tools.jsonl ({name, description, parameters}) and queries.jsonl
({id, query, tools: the right tool names}). Nothing is downloaded: pass the git directory of a clone.

    python bench/extract_data.py bfcl_live <gorilla git dir>     # ShishirPatil/gorilla (Apache-2.0, vendored)
    python bench/extract_data.py toollens <COLT git dir>         # quchangle1/COLT (no licence: git-ignored)

BFCL live: every `BFCL_v4_live_{simple,multiple,parallel,parallel_multiple}` entry (queries users
contributed), its functions pooled into one catalogue (first description of a name kept), the
request's last user message as the query, the functions of its ground truth as the right tools.
ToolLens: the test split (qrels/test.tsv), each API of the corpus a tool named `tool_name: api_name`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

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
            queries.append({"id": entry["id"], "query": users[-1], "tools": right})
    return list(tools.values()), queries


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=["bfcl_live", "toollens"])
    parser.add_argument("gitdir", type=Path)
    args = parser.parse_args()
    tools, queries = (bfcl_live if args.name == "bfcl_live" else toollens)(args.gitdir)
    out = HERE / "data" / args.name
    out.mkdir(parents=True, exist_ok=True)
    for filename, rows in (("tools.jsonl", tools), ("queries.jsonl", queries)):
        (out / filename).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"{out}: {len(tools)} tools, {len(queries)} queries")


if __name__ == "__main__":
    main()
