"""Where a public tool name leads, and the check of a call's arguments against the tool's input schema.

Bad arguments are the caller's fault: refused here, with the field and what is wrong, they never reach
the downstream, so they cannot count as its failure (circuit) or the tool's (shields). A tool's validator is
compiled at its first call (`SchemaCheck`), then kept while its schema stays the same, so a later call pays
one `is_valid`, never a compile. Not when the catalogue changes: checking each of a large catalogue's
schemas against the metaschema held the event loop at a start, before any answer (docs/benchmarks.md), for
tools most of which are never called.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import Draft202012Validator, validator_for

from toolwise.downstream.quickcheck import Check, quick_check

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Route:
    """Where a public tool name leads: the downstream and the tool's own name there."""

    server: str
    tool: str
    public: types.Tool
    check: SchemaCheck | None = None  # the input schema's check (None: arguments go unchecked)

    def problem(self, arguments: dict[str, Any] | None) -> str | None:
        """What is wrong with these arguments for this tool, or None (also when there is no schema)."""
        return None if self.check is None else self.check.problem(arguments)


class SchemaCheck:
    """A tool's input schema, compiled at the first call that needs it (`compiled`): its validator, and a fast
    yes for a plain schema (quickcheck.py; jsonschema judges the rest). Only the event loop calls it."""

    __slots__ = ("_compiled", "_quick", "_validator", "schema", "tool")

    def __init__(self, tool: str, schema: Mapping[str, Any]) -> None:
        self.tool, self.schema = tool, schema
        self._compiled = False
        self._validator: Validator | None = None
        self._quick: Check | None = None

    def compiled(self) -> tuple[Validator | None, Check | None]:
        """The validator (None for an invalid schema: `compile_validator`) and the quick check, compiled once."""
        if not self._compiled:
            self._validator = compile_validator(self.tool, self.schema)
            self._quick = quick_check(self.schema) if self._validator is not None else None
            self._compiled = True
        return self._validator, self._quick

    def problem(self, arguments: dict[str, Any] | None) -> str | None:
        validator, quick = self.compiled()
        if validator is None:
            return None
        if quick is not None and quick(arguments if arguments is not None else {}):
            return None
        return problem(validator, arguments)


MAX_MESSAGE = 300  # characters of the validator's message (it quotes the offending value)


def compile_validator(tool: str, schema: Mapping[str, Any]) -> Validator | None:
    """The validator for a tool's input schema, or None (calls go through unchecked) when the schema
    itself is invalid: the downstream is then the only judge, as it was without toolwise."""
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(dict(schema))
    except SchemaError as exc:
        log.warning("tool %s has an invalid input schema (%s); its arguments are not checked", tool, exc.message)
        return None
    return cls(schema)


def problem(validator: Validator, arguments: Mapping[str, Any] | None) -> str | None:
    """None when the arguments fit the schema; else the field and what is wrong with it."""
    value = arguments if arguments is not None else {}
    if validator.is_valid(value):
        return None
    error = best_match(validator.iter_errors(value))
    message = error.message if len(error.message) <= MAX_MESSAGE else error.message[:MAX_MESSAGE] + "…"
    field = error.json_path[2:] if error.json_path != "$" else ""
    return f"argument {field!r}: {message}" if field else message
