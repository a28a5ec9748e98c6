"""MCP servers' tools with a request for each: bench/data/mcp_manager from tianhaolin1991/MCP-Manager.

Its `manager_server_with_task.jsonl` (at commit MANAGER_COMMIT; later commits replaced the requests
with one-line summaries) holds 293 MCP servers of the official MCP servers list and their 2,656 tools
as MCP-Zero (xfey/MCP-Zero) extracted them from each server's README (name, description, parameters
as `{name: "(type, optional) text"}`), each tool with one request an LLM wrote for it (concrete values,
no tool name). The repository states no licence: the extract is git-ignored, as UltraTool's is.

Each tool becomes `server__tool` (the name toolwise gives a proxied tool: rl/names.py), both parts
cleaned to [A-Za-z0-9_-], its parameters a JSON schema (the type read from the parenthesis, required
unless it says optional), `server` its server's name; each request names its tool as the right one
(a tool listed twice by its server keeps its first description, both requests).

    python bench/extract_data.py mcp_manager <MCP-Manager git dir>
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

MANAGER_COMMIT = "f7f01045417325b479ba3f631fe77d7a70eb5849"
MANAGER_FILE = "python/data/mcp-manager/manager_server_with_task.jsonl"
_HEAD = re.compile(r"^\(([^)]*)\)\s*:?\s*(.*)$", re.DOTALL)
_TYPES = {
    "string": "string",
    "str": "string",
    "number": "number",
    "float": "number",
    "int": "integer",
    "integer": "integer",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "object": "object",
    "dict": "object",
}


def clean(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "_", name.strip()).strip("_")


def schema(parameters: dict[str, str]) -> dict[str, Any]:
    """`{name: "(string, optional) text"}` as a JSON schema (a type found in the parenthesis, else none)."""
    properties: dict[str, dict[str, Any]] = {}
    required = []
    for name, text in parameters.items():
        match = _HEAD.match(text.strip())
        head, description = (match.group(1), match.group(2)) if match else ("", text.strip())
        words = re.findall(r"[a-z]+", head.lower())
        spec: dict[str, Any] = {"description": description}
        if kind := next((_TYPES[w] for w in words if w in _TYPES), None):
            spec["type"] = kind
        properties[name] = spec
        if "optional" not in words:
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def mcp_manager(gitdir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    text = subprocess.run(
        ["git", "-C", str(gitdir), "show", f"{MANAGER_COMMIT}:{MANAGER_FILE}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    tools: dict[str, dict[str, Any]] = {}
    queries: list[dict[str, Any]] = []
    for server in (json.loads(line) for line in text.splitlines() if line.strip()):
        for tool in server["tools"]:
            name = f"{clean(server['name'])}__{clean(tool['name'])}"
            tools.setdefault(
                name,
                {
                    "name": name,
                    "description": tool["description"],
                    "parameters": schema(tool["parameter"]),
                    "server": server["name"],
                },
            )
            if task := tool["task"].strip():
                queries.append({"id": f"mcp_manager-{len(queries)}", "query": task, "tools": [name]})
    return list(tools.values()), queries
