"""A fast yes for the plain input schemas most tools have, so that a call's arguments, checked on the
event loop for every call, are checked without jsonschema's general machinery.

`quick_check(schema)` compiles a schema built only of `type`, `properties`, `required`, `items`,
`additionalProperties: false` and annotations into a predicate that answers True only when the value
surely fits; False means "not sure" and the caller asks jsonschema, which has the last word and the
message. Any other keyword (`enum`, `pattern`, `$ref`, bounds, ...) leaves the schema to jsonschema
(None).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]

ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$schema", "$comment", "deprecated"})
OBJECT_KEYS = ANNOTATIONS | {"type", "properties", "required", "additionalProperties"}
LEAF_KEYS = ANNOTATIONS | {"type"}
ARRAY_KEYS = ANNOTATIONS | {"type", "items"}


def _is_string(value: Any) -> bool:
    return type(value) is str


def _is_boolean(value: Any) -> bool:
    return type(value) is bool


def _is_integer(value: Any) -> bool:
    return type(value) is int  # 1.0 is an integer to JSON Schema too: "not sure", jsonschema decides


def _is_number(value: Any) -> bool:
    return type(value) is int or type(value) is float


def _is_null(value: Any) -> bool:
    return value is None


LEAVES: dict[str, Check] = {
    "string": _is_string,
    "boolean": _is_boolean,
    "integer": _is_integer,
    "number": _is_number,
    "null": _is_null,
}


def quick_check(schema: Any) -> Check | None:
    """The predicate for `schema`, or None when the schema has anything it does not know."""
    if not isinstance(schema, Mapping):
        return None
    kind = schema.get("type")
    if kind == "object":
        return _object(schema)
    if kind == "array":
        return _array(schema)
    if isinstance(kind, str) and kind in LEAVES and schema.keys() <= LEAF_KEYS:
        return LEAVES[kind]
    return None


def _object(schema: Mapping[str, Any]) -> Check | None:
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)  # whether names beyond `properties` may come
    if not (
        schema.keys() <= OBJECT_KEYS
        and isinstance(properties, Mapping)
        and isinstance(required, list)
        and all(isinstance(name, str) for name in required)
        and type(extra) is bool
    ):
        return None
    checks: dict[str, Check] = {}
    for name, sub in properties.items():
        check = quick_check(sub)
        if check is None:
            return None
        checks[name] = check
    needed = tuple(required)

    def fits(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for name in needed:
            if name not in value:
                return False
        for name, item in value.items():
            check = checks.get(name)
            if check is None:
                if not extra:
                    return False
            elif not check(item):
                return False
        return True

    return fits


def _array(schema: Mapping[str, Any]) -> Check | None:
    if not schema.keys() <= ARRAY_KEYS:
        return None
    if "items" not in schema:
        return lambda value: type(value) is list
    item = quick_check(schema["items"])
    if item is None:
        return None
    return lambda value: type(value) is list and all(item(v) for v in value)
