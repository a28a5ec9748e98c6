"""Large catalogues: what tools/list shows (`exposure`, server/exposure.py), `search_tools` and `call_tool`.

With hundreds of tools, sending every schema to the model wastes its context. In `search` mode
tools/list holds `search_tools`, `call_tool` and the pinned tools (`pinned_tools` globs match
toolwise's own tools too); in `learned` mode also the `exposure_k` tools the policy ranked highest
for this client's recent requests (its last `recommend_tool`/`search_tools` decisions), announced
with list_changed when that set changes, at most once per `exposure_interval_s` per client. The two
are listed with compact schemas (no titles, no null unions, a clause of description each): the list
is what every turn pays for. `search_tools` is a decision like `recommend_tool`'s (the same
`LearningService.recommend`), returning full definitions so the model can call at once, and finds
toolwise's own tools when the query names one (`submit_feedback`, "end session"); `call_tool` is a
proxied call like any other (validated, recorded, attributed to the search that listed the tool).
Every tool stays callable by its own name in every mode. The tools toolwise knows matter carry
`_meta["anthropic/alwaysLoad"]`, so clients with a tool search of their own keep them loaded.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, Field

from toolwise.learning.sessions import Session
from toolwise.rl.names import name_key
from toolwise.server.own import Input, Output, OwnTool, compact
from toolwise.server.recommend import evidence_of, nothing_fits_line, reason_of, reported_score
from toolwise.server.schemas import resolved, type_of
from toolwise.server.services import Services
from toolwise.server.tools import own_tools

SEARCH_TOOLS = "search_tools"
CALL_TOOL = "call_tool"
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]'\"])(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z])")  # not after e.g, i.e


class SearchToolsInput(Input):
    query: str = Field(min_length=1, description="The task, in words")
    top_k: int = Field(default=5, ge=1, le=50)
    format: Literal["json", "markdown"] = Field(default="json", description="markdown: fewer tokens")
    session_id: str | None = None  # default: this connection's (see SESSION_FIELD)


class FoundTool(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    score: float = Field(description="The policy's ranking score, as recommend_tool's.")
    reason: str = Field(description="Why it ranks there: the prior's relevance and the learned reward.")


class SearchToolsOutput(Output):
    decision_id: str
    session_id: str
    policy: str
    format: str
    nothing_fits: bool = Field(
        default=False, description="No tool seems to serve this request; the tools are best guesses (rl/fit.py)."
    )
    tools: list[FoundTool]

    def text(self) -> str:
        """The tools as JSON or markdown, after a line saying so when nothing fits."""
        first = [nothing_fits_line(self.tools[0].name)] if self.nothing_fits and self.tools else []
        if self.format == "json":
            return "\n".join([*first, json.dumps([t.model_dump() for t in self.tools], separators=(",", ":"))])
        return "\n".join(
            [*first, "Call one with call_tool(name, arguments), or by its name:", *(markdown(t) for t in self.tools)]
        )


def markdown(tool: FoundTool) -> str:
    """One tool as compact markdown: a heading with why it ranks there, its description, one line per
    parameter (nested fields dotted) with what a call needs: type, required, allowed values, default,
    bounds, and its description's first sentence. No JSON schema syntax: about half the tokens."""
    lines = [f"## {tool.name} ({tool.reason})"]
    if tool.description:
        lines.append(tool.description)
    lines.extend(parameter_lines(tool.input_schema, tool.input_schema))
    return "\n".join(lines)


def parameter_lines(schema: dict[str, Any], root: dict[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    """`- path: facts — first sentence` per property of `schema`, then its nested fields (objects as
    `a.b`, arrays of objects as `a[].b`), local `$ref`s followed, at most 4 levels deep."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or depth > 4:
        return []
    required = set(schema.get("required") or ())
    lines = []
    for name, given in properties.items():
        spec = resolved(given, root)
        facts = [type_of(spec, root), *(["required"] if name in required else []), *constraints(spec)]
        about = first_sentence(spec.get("description"))
        lines.append(f"- {prefix}{name}: {', '.join(facts)}" + (f" — {about}" if about else ""))
        lines.extend(parameter_lines(spec, root, f"{prefix}{name}.", depth + 1))
        items = resolved(spec.get("items"), root)
        lines.extend(parameter_lines(items, root, f"{prefix}{name}[].", depth + 1))
    return lines


def constraints(spec: dict[str, Any]) -> list[str]:
    """What a value must be beyond its type: allowed values, bounds, pattern; and its default."""
    out = []
    if isinstance(spec.get("enum"), list):
        out.append("one of " + "|".join(json.dumps(v) for v in spec["enum"]))
    for key, sign in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤")):
        if key in spec:
            out.append(f"{sign} {spec[key]}")
    if "pattern" in spec:
        out.append(f"pattern {spec['pattern']}")
    if "default" in spec:
        out.append(f"default {json.dumps(spec['default'])}")
    return out


def first_sentence(text: Any) -> str:
    """A description's first sentence (up to a full stop followed by a capital), whitespace folded."""
    if not isinstance(text, str):
        return ""
    folded = " ".join(text.split())
    return _SENTENCE_END.split(folded, maxsplit=1)[0]


class CallToolInput(Input):
    name: str = Field(min_length=1)
    arguments: dict[str, Any] | None = None  # null, as a model may write "none", is none (tools/call's own)


def call_tool_definition() -> types.Tool:
    return types.Tool(
        name=CALL_TOOL,
        description="Call a tool by name (e.g. one search_tools found), arguments per its schema.",
        input_schema=compact(CallToolInput.model_json_schema()),
        annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=True),
    )


def own_named(services: Services, query: str) -> list[OwnTool[Any, Any]]:
    """toolwise's own tools (as this server offers them) that `query` names: every word of the name in
    it, in any order or case (`submit_feedback`, "end the session"). Listing them would cost every turn."""
    words = set(name_key(query).split())
    offered = own_tools(admin=services.settings.admin_tools, snapshots=services.settings.snapshot_tools)
    return [t for name, t in offered.items() if set(name_key(name).split()) <= words]


async def search_tools(services: Services, args: SearchToolsInput, session: Session) -> SearchToolsOutput:
    """`search_tools`: the policy's ranking (`LearningService.recommend`, the decision recommend_tool
    makes, a tool the query names outright first) with each tool's full definition."""
    d = await services.agent.recommend(session, args.query, args.top_k, None, named_first=True)
    evidence = evidence_of(services, d, None)
    own = own_named(services, args.query)
    found = [
        FoundTool(
            name=t.name,
            description=t.description,
            input_schema=t.input.model_json_schema(),
            score=1.0,
            reason="toolwise's own tool, named by the query",
        )
        for t in own
    ]
    for r in d.ranked[: max(args.top_k - len(found), 0)]:
        route = services.catalogue.resolve(r.tool)
        if route is None:  # left the catalogue since the learner was told
            continue
        tool = route.public
        found.append(
            FoundTool(
                name=tool.name,
                description=tool.description or "",
                input_schema=tool.input_schema,
                score=reported_score(r.score),
                reason=reason_of(d, r, evidence),
            )
        )
    return SearchToolsOutput(
        decision_id=d.decision_id,
        session_id=session.name,
        policy=d.policy,
        format=args.format,
        nothing_fits=d.nothing_fits and not own,  # a query naming toolwise's own tool found it
        tools=found,
    )


def search_tool() -> OwnTool[SearchToolsInput, SearchToolsOutput]:
    return OwnTool(
        SEARCH_TOOLS,
        "Find tools for a task: full definitions, best first, ranked by what toolwise learned.",
        SearchToolsInput,
        SearchToolsOutput,
        search_tools,
        False,
        uses_store=False,
        waits=False,
    )
