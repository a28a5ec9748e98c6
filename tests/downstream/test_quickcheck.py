"""The fast check of plain input schemas never lets through what jsonschema refuses."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from toolwise.downstream.quickcheck import quick_check
from toolwise.downstream.routes import Route, SchemaCheck, compile_validator, problem

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "description": "how many"},
            "x": {"type": "number"},
            "flag": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "opts": {"type": "object", "properties": {"deep": {"type": "null"}}, "additionalProperties": False},
        },
        "required": ["n"],
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"any": {"type": "array"}}},
]
VALUES: list[Any] = [
    {},
    {"text": "hi"},
    {"text": 3},
    {"text": None},
    {"text": "hi", "more": 1},
    {"n": 1},
    {"n": 1.0},
    {"n": 1.5},
    {"n": True},
    {"n": 1, "x": 2},
    {"n": 1, "x": 2.5},
    {"n": 1, "x": "2"},
    {"n": 1, "x": False},
    {"n": 1, "flag": 0},
    {"n": 1, "flag": False},
    {"n": 1, "tags": ["a", "b"]},
    {"n": 1, "tags": ["a", 2]},
    {"n": 1, "tags": "a"},
    {"n": 1, "opts": {"deep": None}},
    {"n": 1, "opts": {"deep": 0}},
    {"n": 1, "opts": {"other": None}},
    {"n": 1, "extra": 1},
    {"any": [1, "x", None]},
    {"any": {}},
    [],
    "text",
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_plain_schemas_are_checked_fast_with_jsonschemas_verdicts(schema: dict[str, Any]) -> None:
    validator = compile_validator("t", schema)
    assert validator is not None
    route = Route("s", "t", types.Tool(name="t", input_schema=schema), SchemaCheck("t", schema))
    assert route.check is not None and route.check.compiled()[1] is not None
    for value in VALUES:
        assert route.problem(value) == problem(validator, value), value


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}},
        {"type": "object", "properties": {"s": {"type": "string", "minLength": 2}}},
        {"type": "object", "properties": {"s": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}},
        {"type": "object", "properties": {"s": {"type": ["string", "null"]}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"properties": {"s": {"type": "string"}}},
    ],
)
def test_schemas_with_other_keywords_are_left_to_jsonschema(schema: dict[str, Any]) -> None:
    assert quick_check(schema) is None
