"""The server-missing split of bench/unanswerable.py: a request whose whole server is not installed.

An MCP user meets this more than a lone missing tool: "find me a recipe" with no recipe server among
those toolwise proxies. Each request is judged against its catalogue without every tool of the servers
its right tools belong to (the rest of the catalogue, other servers, kept). A catalogue's servers are
what its data says:

- the README's example: the `server__tool` prefix (time, git);
- MCP-Manager's MCP servers (bench/extract_mcp.py): the same prefix, each tool's server as listed;
- BFCL multi-turn: the API class each tool belongs to, from its description ("This tool belongs to the
  Gorilla file system", "… the trading system, …": GorillaFileSystem, TradingBot, TravelAPI,
  VehicleControlAPI, MessageAPI, TwitterAPI, TicketAPI, MathAPI; the two memory suites as one);
- BFCL live and NESTFUL: none. BFCL live's functions were deduplicated across requests when vendored
  (bench/data keeps no per-request function set), and NESTFUL mixes API-prefixed names
  (`Tripadvisor_Search_Restaurants`, `Hotels.SearchHotel`) with standalone functions
  (`calculate_tip`) whose server would be a guess: both skipped.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from toolwise.rl.names import PREFIX_SEPARATOR
from toolwise.rl.toolindex import ToolDoc

KIND = "server-missing"
_BELONGS = re.compile(r"This tool belongs to the ([^,.]+)")


def server_map(name: str, tools: Sequence[ToolDoc]) -> dict[str, str] | None:
    """Each tool's server in the catalogue `name`, or None where its data gives no grouping."""
    if name in ("everyday", "mcp_manager"):
        return {t.name: t.name.partition(PREFIX_SEPARATOR)[0] for t in tools}
    if name == "bfcl_multi_turn":
        found = {t.name: _BELONGS.match(t.description) for t in tools}
        if missing := [name for name, m in found.items() if m is None]:
            raise ValueError(f"BFCL multi-turn tools naming no API class in their description: {missing[:5]}")
        return {name: m.group(1).removesuffix(" suite") for name, m in found.items() if m is not None}
    return None


def server_groups(
    requests: Sequence[dict[str, Any]], server_of: Mapping[str, str]
) -> dict[frozenset[str], list[dict[str, Any]]]:
    """The requests by the servers their right tools belong to (those servers are removed together)."""
    groups: dict[frozenset[str], list[dict[str, Any]]] = defaultdict(list)
    for r in requests:
        groups[frozenset(server_of[t] for t in r["tools"])].append(r)
    return groups


def without_servers(tools: Sequence[ToolDoc], server_of: Mapping[str, str], gone: frozenset[str]) -> list[ToolDoc]:
    """The catalogue without every tool of the servers `gone`."""
    return [t for t in tools if server_of[t.name] not in gone]
