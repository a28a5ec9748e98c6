"""What one of toolwise's own MCP tools is: a pydantic input and output (the JSON schemas clients see
are generated from them, inputs are validated by them, each output renders a short text too) and an
async handler given the running services and the caller's session."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from toolwise.learning.sessions import Session
from toolwise.server.services import Services

SESSION_FIELD = Field(
    default=None,
    description="Session to act in; defaults to this client connection (stdio process or HTTP session).",
)


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Output(BaseModel):
    def text(self) -> str:
        return self.model_dump_json(indent=1)

    def structured(self) -> dict[str, Any]:
        """The structured content of the answer: the model as JSON values."""
        return self.model_dump(mode="json")


In = TypeVar("In", bound=Input)
Out = TypeVar("Out", bound=Output)

# A handler gets the running services, its validated input and the caller's session (a transient one
# for tools that take no session_id); a `UserError` it raises becomes an `is_error` result naming what was
# wrong (app.py), anything else is a bug: logged with its traceback, answered generically.
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

    @property
    def takes_session(self) -> bool:
        return "session_id" in self.input.model_fields

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input.model_json_schema(),
            output_schema=self.output.model_json_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=False,
                idempotent_hint=self.read_only,
                open_world_hint=False,
            ),
        )
