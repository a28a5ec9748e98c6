"""A JSON schema's types in words (`integer|null`, `array of number`): for descriptions that stand in for a schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter


def resolved(spec: Any, root: dict[str, Any]) -> dict[str, Any]:
    """A property's schema, a local `$ref` (`#/$defs/Name`) replaced by what it names."""
    if not isinstance(spec, dict):
        return {}
    ref = spec.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        if isinstance(target, dict):
            return {**target, **{k: v for k, v in spec.items() if k != "$ref"}}
    return spec


def type_of(spec: dict[str, Any], root: dict[str, Any]) -> str:
    """`string`, `integer|null`, `array of number`, `string (date-time)`; `any` when unsaid."""
    kind = spec.get("type")
    if isinstance(kind, list):
        text = "|".join(map(str, kind))
    elif isinstance(kind, str):
        text = kind
    else:
        options = spec.get("anyOf") or spec.get("oneOf") or []
        text = "|".join(type_of(resolved(o, root), root) for o in options) if options else "any"
    if text == "array" and isinstance(spec.get("items"), dict):
        text = f"array of {type_of(resolved(spec['items'], root), root)}"
    return f"{text} ({spec['format']})" if "format" in spec else text


def checked_per_row(row: type[Any]) -> Callable[[dict[str, Any]], None]:
    """A `json_schema_extra` for a list field that may hold thousands of `row`s (one per tool): a row
    is declared as an object that has every field of `row` (their types and units in its description),
    not with a schema per field, so a client that validates structured content against the output
    schema (the SDK's client does, with jsonschema, on every call) takes one step per row, not one per
    value, which was most of a large get_tool_metrics answer. The server builds the rows with the
    pydantic model, so the values have the types described."""

    def extra(schema: dict[str, Any]) -> None:
        full = TypeAdapter(row).json_schema()
        fields = "; ".join(f"{name}: {type_of(spec, full)}" for name, spec in full["properties"].items())
        schema["items"] = {
            "type": "object",
            "title": full["title"],
            "description": f"{full.get('description', '')} Fields: {fields}.".strip(),
            "required": full["required"],
        }

    return extra
