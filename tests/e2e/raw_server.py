"""A real MCP server (stdio) written without the SDK, as servers in other languages are, whose tools answer
results the protocol does not allow: `hologram` content of a type MCP does not define, `nocontent` a result with
no `content`, `bad_structured` structured content that breaks its own output schema; `ok` answers "fine"."""

from __future__ import annotations

import json
import sys
from typing import Any

OBJECT = {"type": "object"}
COUNT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS: list[dict[str, Any]] = [
    {"name": "hologram", "inputSchema": OBJECT},
    {"name": "nocontent", "inputSchema": OBJECT},
    {"name": "bad_structured", "inputSchema": OBJECT, "outputSchema": COUNT},
    {"name": "ok", "inputSchema": OBJECT},
]
RESULTS: dict[str, dict[str, Any]] = {
    "hologram": {"content": [{"type": "text", "text": "a"}, {"type": "hologram", "data": 1}]},
    "nocontent": {},
    "bad_structured": {"content": [{"type": "text", "text": "many"}], "structuredContent": {"n": "many"}},
    "ok": {"content": [{"type": "text", "text": "fine"}]},
}


def answer(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    if method == "initialize":
        capabilities = {"tools": {"listChanged": False}}
        return {
            "protocolVersion": "2025-06-18",
            "capabilities": capabilities,
            "serverInfo": {"name": "raw", "version": "1"},
        }
    if method == "tools/list":
        return {"tools": TOOLS}
    if method == "tools/call":
        return RESULTS[request["params"]["name"]]
    return {}


for line in sys.stdin:
    request = json.loads(line)
    if "id" in request:  # a notification needs no answer
        if request.get("method") in ("initialize", "tools/list", "tools/call", "ping"):
            reply = {"jsonrpc": "2.0", "id": request["id"], "result": answer(request)}
        else:
            reply = {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "Method not found"}}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
