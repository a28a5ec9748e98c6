"""search_tools' compact markdown: everything a call needs, one line per parameter, no schema syntax."""

from __future__ import annotations

import json

from toolwise.server.discovery import FoundTool, markdown

SCHEMA = {
    "type": "object",
    "$defs": {"Window": {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1}}}},
    "properties": {
        "status": {"type": "string", "enum": ["open", "closed"], "default": "open",
                   "description": "Which issues to list. Closed ones are archived after a year."},
        "filter": {"type": "object", "required": ["label"],
                   "properties": {"label": {"type": "string", "description": "A label, e.g. Bug."}}},
        "owners": {"type": "array", "items": {"type": "object", "properties": {"login": {"type": "string"}}}},
        "since": {"type": ["string", "null"], "format": "date-time"},
        "window": {"$ref": "#/$defs/Window"},
    },
    "required": ["status"],
}  # fmt: skip


def test_markdown_keeps_what_a_call_needs_and_drops_the_schema_syntax() -> None:
    tool = FoundTool(name="gh__list_issues", description="List issues.", input_schema=SCHEMA, score=0.9,
                     reason="relevance 0.80, expected reward 0.70")  # fmt: skip
    text = markdown(tool)
    assert text.splitlines() == [
        "## gh__list_issues (relevance 0.80, expected reward 0.70)",
        "List issues.",
        '- status: string, required, one of "open"|"closed", default "open" — Which issues to list',
        "- filter: object",
        "- filter.label: string, required — A label, e.g. Bug.",
        "- owners: array of object",
        "- owners[].login: string",
        "- since: string|null (date-time)",
        "- window: object",
        "- window.days: integer, ≥ 1",
    ]
    assert len(text) < 0.6 * len(json.dumps(tool.model_dump(), separators=(",", ":")))
