"""What one of toolwise's own MCP tools is: a pydantic input and output (the JSON schemas clients see
are generated from them, inputs are validated by them, each output renders a short text too) and an
async handler given the running services and the caller's session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from types import UnionType
from typing import Any, Generic, TypeVar, Union, get_args, get_origin

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.fields import FieldInfo

from toolwise.learning.sessions import Session
from toolwise.server.services import Services

SESSION_FIELD = Field(default=None)  # a conversation's id; absent: this client connection (stdio process, HTTP session)
# What a listed input schema leaves out: the model reads the list every turn, and the input model
# still checks every bound when called, its error naming the bound.
LISTING_DROPS = frozenset(
    ["title", "additionalProperties", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
     "exclusiveMaximum"]
)  # fmt: skip


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_truth_for_a_number(cls, value: Any, info: ValidationInfo) -> Any:
        """`true` given for a number is a mistake (pydantic would read it as 1: `top_k: true`, one answer)."""
        if isinstance(value, bool) and info.field_name is not None and _numeric(cls.model_fields[info.field_name]):
            raise ValueError(f"a number, not {str(value).lower()}")
        return value


def _numeric(field: FieldInfo) -> bool:
    """The field takes a number (int or float, maybe None) and never a bool."""
    kinds = get_args(field.annotation) if get_origin(field.annotation) in (Union, UnionType) else (field.annotation,)
    return bool(kinds) and all(k in (int, float, type(None)) for k in kinds) and not all(k is type(None) for k in kinds)


class NoInput(Input):
    pass


class Output(BaseModel):
    def text(self) -> str:
        return self.model_dump_json(indent=1)

    def structured(self) -> dict[str, Any]:
        """The structured content of the answer: the model as JSON values."""
        return self.model_dump(mode="json")


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic input schema as every turn's tools/list carries it: what a model needs to write a
    call (names, types, allowed values, defaults, what is required), without titles, null unions
    (an optional field's `anyOf [X, null]` with default null is plain X: absent means unset), a type an
    enum implies, nor bounds and `additionalProperties` (checked when called, the error naming them)."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in LISTING_DROPS or (key == "type" and "enum" in schema):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: compact(spec) for name, spec in value.items()}
        elif isinstance(value, dict):
            out[key] = compact(value)
        else:
            out[key] = value
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options and out.get("default") is None:
        kept = next(o for o in options if o != {"type": "null"})
        out = {**{k: v for k, v in out.items() if k not in ("anyOf", "default")}, **compact(kept)}
    return out


ANNOTATIONS = frozenset(["title", "description", "default", "examples"])  # keywords that validate nothing


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic output schema with its local `$ref`s replaced by the definitions they name, and each
    `anyOf` of bare types as one type list (`anyOf [number, null]` is `type [number, null]`): the same
    documents validate. A client validates every answer against it; resolving a `$ref` per list item cost
    a Python client (jsonschema) a third of its validation, and an `anyOf` per optional field, which it
    tries branch by branch, another third of recommend_tool's. A recursive definition keeps its `$ref`s."""
    definitions = schema.get("$defs", {})

    def walk(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        beside = {key: value for key, value in node.items() if key != "$ref"}
        if isinstance(ref, str) and ref.startswith("#/$defs/") and set(beside) <= ANNOTATIONS:
            name = ref.removeprefix("#/$defs/")
            if name in definitions and name not in seen:
                return {**walk(definitions[name], seen | {name}), **beside}  # a field's own description wins
        return _type_list({key: walk(value, seen) for key, value in node.items()})

    out: dict[str, Any] = walk({k: v for k, v in schema.items() if k != "$defs"}, frozenset())
    if _refers(out):  # a recursive definition: its $refs still need $defs
        out["$defs"] = definitions
    return out


def _type_list(node: dict[str, Any]) -> dict[str, Any]:
    """`node` with an `anyOf` whose every branch only names a type written as that list of types."""
    options = node.get("anyOf")
    if "type" in node or not isinstance(options, list) or not options:
        return node
    if not all(isinstance(o, dict) and set(o) == {"type"} and isinstance(o["type"], str) for o in options):
        return node
    return {**{k: v for k, v in node.items() if k != "anyOf"}, "type": [o["type"] for o in options]}


def _refers(node: Any) -> bool:
    if isinstance(node, dict):
        return "$ref" in node or any(_refers(value) for value in node.values())
    return isinstance(node, list) and any(_refers(item) for item in node)


In = TypeVar("In", bound=Input)
Out = TypeVar("Out", bound=Output)

# A handler gets the running services, its validated input and the caller's session (a transient one
# for tools that take no session_id); a `UserError` it raises becomes an `is_error` result naming what was
# wrong (handlers.py), anything else is a bug: logged with its traceback, answered generically.
Handler = Callable[[Services, In, Session], Awaitable[Out]]


@dataclass(frozen=True, slots=True)
class OwnTool(Generic[In, Out]):
    name: str
    description: str
    input: type[In]
    output: type[Out]
    handler: Handler[In, Out]
    read_only: bool
    admin: bool = False
    uses_store: bool = True  # False: answers from memory, so it still answers while the database fails
    waits: bool = True  # False (a recommendation): reads the learned state as it is, not after the calls pending
    unlisted: tuple[str, ...] = ()  # input fields accepted but left out of the listing (experts' knobs)

    @property
    def takes_session(self) -> bool:
        return "session_id" in self.input.model_fields

    def listed_schema(self) -> dict[str, Any]:
        """The input schema tools/list carries: compact, without the `unlisted` fields."""
        schema = compact(self.input.model_json_schema())
        if self.unlisted:
            kept = {k: v for k, v in schema["properties"].items() if k not in self.unlisted}
            schema = {**schema, "properties": kept}
        return schema

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.listed_schema(),
            output_schema=inlined(self.output.model_json_schema()),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=False,
                idempotent_hint=self.read_only,
                open_world_hint=False,
            ),
        )
