"""The output schemas toolwise lists for its own tools: what a client validates every answer against."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator
from pydantic import BaseModel

from toolwise.server.own import inlined
from toolwise.server.recommend import RecommendToolOutput
from toolwise.server.tools import own_tools


class Node(BaseModel):
    name: str
    children: list[Node] = []


class Tree(BaseModel):
    root: Node


def test_every_listed_output_schema_names_no_definition_to_resolve() -> None:
    for tool in own_tools(admin=True, snapshots=True).values():
        schema = tool.definition().output_schema
        assert schema is not None and "$ref" not in json.dumps(schema), tool.name
        Draft202012Validator.check_schema(schema)


def test_an_inlined_schema_accepts_and_refuses_what_the_model_does() -> None:
    schema = Draft202012Validator(inlined(RecommendToolOutput.model_json_schema()))
    answer = {
        "decision_id": "d",
        "context_hash": "h",
        "policy": "outcome",
        "explored": False,
        "propensity": 1.0,
        "session_id": "s",
        "recommendations": [
            {"tool": "t", "score": 1.0, "confidence": 0.5, "relevance": 0.2, "reason": "r", "explored": False}
        ],
    }
    assert schema.is_valid(answer)
    answer["recommendations"][0]["confidence"] = "high"  # type: ignore[index]
    assert not schema.is_valid(answer)


def test_a_recursive_definition_keeps_its_references() -> None:
    schema = inlined(Tree.model_json_schema())
    validator = Draft202012Validator(schema)
    assert "$defs" in schema
    assert validator.is_valid({"root": {"name": "a", "children": [{"name": "b"}]}})
    assert not validator.is_valid({"root": {"name": "a", "children": [{"name": 1}]}})


def test_an_optional_number_is_listed_as_a_type_list_and_still_refuses_a_string() -> None:
    item = inlined(RecommendToolOutput.model_json_schema())["properties"]["recommendations"]["items"]
    assert item["properties"]["p_agent"]["type"] == ["number", "null"] and "anyOf" not in item["properties"]["p_agent"]
    validator = Draft202012Validator(item)
    answer = {"tool": "t", "score": 1.0, "confidence": 0.5, "relevance": 0.2, "reason": "r", "explored": False}
    assert validator.is_valid({**answer, "p_agent": None}) and validator.is_valid({**answer, "p_agent": 0.3})
    assert not validator.is_valid({**answer, "p_agent": "likely"})
