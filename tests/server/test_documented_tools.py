"""README.md's and docs/reference.md's tables of toolwise's own tools write each tool as a signature,
`recommend_tool(query, top_k=5, candidates=None, session_id=None)`: it names the tool's listed inputs,
with their defaults, as the code takes them (the unlisted experts' knobs left out), and every tool is there."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from toolwise.server.discovery import CallToolInput, search_tool
from toolwise.server.tools import own_tools

ROOT = Path(__file__).parents[2]


def documented(doc: Path) -> dict[str, str]:
    """Each `name(params)` the doc's own-tools table (`| tool | does |`) writes in its first column."""
    found: dict[str, str] = {}
    inside = False
    for line in doc.read_text().splitlines():
        inside = line == "| tool | does |" or (inside and line.startswith("|"))
        if inside:
            found |= dict(re.findall(r"`([a-z_]+)\(([^`]*)\)`", line.split(" | ")[0]))
    return found


def signature(model: type[BaseModel], unlisted: tuple[str, ...]) -> list[str]:
    """The inputs as the tables write them: required ones bare, the others `name=default`."""
    written = []
    for name, field in model.model_fields.items():
        if name in unlisted:
            continue
        if field.is_required():
            written.append(name)
        else:
            default: Any = field.get_default(call_default_factory=False)
            written.append(f"{name}={json.dumps(default) if isinstance(default, str) else default}")
    return written


TOOLS = {t.name: (t.input, t.unlisted) for t in [*own_tools(admin=True).values(), search_tool()]}


@pytest.mark.parametrize("doc", [ROOT / "README.md", ROOT / "docs" / "reference.md"], ids=lambda p: p.name)
def test_each_own_tool_is_written_with_the_inputs_and_defaults_it_takes(doc: Path) -> None:
    tables = documented(doc)
    missing = sorted(set(TOOLS) - set(tables))
    assert not missing, f"{doc.name} does not list: {missing}"
    wrong = []
    for name, (model, unlisted) in TOOLS.items():
        written, takes = [p.strip() for p in tables[name].split(",") if p.strip()], signature(model, unlisted)
        if written != takes:
            wrong.append(f"{name}: {doc.name} writes ({', '.join(written)}), it takes ({', '.join(takes)})")
    called = [p.strip() for p in tables["call_tool"].split(",")]
    if called != list(CallToolInput.model_fields):
        wrong.append(f"call_tool: {doc.name} writes {called}, it takes {list(CallToolInput.model_fields)}")
    assert not wrong, "\n".join(wrong)
