"""Large catalogues: what tools/list shows (`exposure`), `search_tools` and `call_tool`.

With hundreds of tools, sending every schema to the model wastes its context. In `search` mode
tools/list holds the pinned tools, toolwise's own tools, `search_tools` and `call_tool`; in `learned`
mode also the `exposure_k` tools the policy ranked highest for this client's recent requests (its
last `recommend_tool`/`search_tools` decisions), announced with list_changed when that set changes,
at most once per `exposure_interval_s` per client. `search_tools` is a decision like
`recommend_tool`'s (the same `LearningService.recommend`), returning full definitions so the model
can call at once; `call_tool` is a proxied call like any other (validated, recorded, attributed to
the search that listed the tool). Every tool stays callable by its own name in every mode.
"""

from __future__ import annotations

import json
import re
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, Field

from toolwise.rl import Decision
from toolwise.server.catalogue import Catalogue, Route
from toolwise.server.config import Settings
from toolwise.server.services import Services
from toolwise.server.sessions import Session
from toolwise.server.tools import SESSION_FIELD, Input, Output, OwnTool, reason_of

SEARCH_TOOLS = "search_tools"
CALL_TOOL = "call_tool"
CLIENTS = 10_000  # clients whose learned set is remembered (least recently used forgotten)
RECENT = 8  # decisions per client the learned set is drawn from
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]'\"])(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z])")  # not after e.g, i.e


class SearchToolsInput(Input):
    query: str = Field(min_length=1, description="What the agent wants to do, in its own words.")
    top_k: int = Field(default=5, ge=1, le=50)
    format: Literal["json", "markdown"] = Field(
        default="json", description="json: full definitions; markdown: the same, compact (fewer tokens)."
    )
    session_id: str | None = SESSION_FIELD


class FoundTool(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    score: float = Field(description="The policy's ranking score (expected reward plus exploration).")
    reason: str = Field(description="Why it ranks there: the prior's relevance and the learned reward.")


class SearchToolsOutput(Output):
    decision_id: str
    session_id: str
    policy: str
    format: str
    tools: list[FoundTool]

    def text(self) -> str:
        if self.format == "json":
            return json.dumps([t.model_dump() for t in self.tools], separators=(",", ":"))
        return "\n".join(
            ["Call one with call_tool(name, arguments), or by its name:", *(markdown(t) for t in self.tools)]
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
    name: str = Field(min_length=1, description="The tool to call (as search_tools named it).")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Its arguments, per its input schema.")


def call_tool_definition() -> types.Tool:
    return types.Tool(
        name=CALL_TOOL,
        description="Call any tool by name, listed or not (e.g. one search_tools found); arguments are "
        "checked against its input schema first.",
        input_schema=CallToolInput.model_json_schema(),
        annotations=types.ToolAnnotations(destructive_hint=True, open_world_hint=True),
    )


async def search_tools(services: Services, args: SearchToolsInput, session: Session) -> SearchToolsOutput:
    """`search_tools`: the policy's ranking (`LearningService.recommend`, the decision recommend_tool
    makes, a tool the query names outright first) with each tool's full definition."""
    d = services.learning.recommend(session, args.query, args.top_k, None, named_first=True)
    found = []
    for r in d.ranked:
        route = services.catalogue.resolve(r.tool)
        if route is None:  # left the catalogue since the learner was told
            continue
        tool = route.public
        found.append(
            FoundTool(
                name=tool.name,
                description=tool.description or "",
                input_schema=tool.input_schema,
                score=r.score,
                reason=reason_of(d, r),
            )
        )
    return SearchToolsOutput(
        decision_id=d.decision_id, session_id=session.id, policy=d.policy, format=args.format, tools=found
    )


def search_tool() -> OwnTool[SearchToolsInput, SearchToolsOutput]:
    return OwnTool(
        SEARCH_TOOLS,
        "Find the tools for a task described in words: full definitions, best first, ranked by what "
        "toolwise learned from earlier calls. Call one with call_tool (or by its name).",
        SearchToolsInput,
        SearchToolsOutput,
        search_tools,
        False,
        uses_store=False,
    )


@dataclass(slots=True)
class _Learned:
    recent: deque[tuple[str, ...]] = field(default_factory=lambda: deque(maxlen=RECENT))  # ranked tools, newest last
    shown: tuple[str, ...] = ()
    changed_at: float = float("-inf")  # monotonic seconds


class Exposure:
    """Which tools a client's tools/list holds. In memory, bounded in clients."""

    def __init__(self, settings: Settings, catalogue: Catalogue) -> None:
        self.mode = settings.exposure
        self.pinned = tuple(settings.pinned_tools)
        self.k = settings.exposure_k
        self.interval_s = settings.exposure_interval_s
        self.catalogue = catalogue
        self._clients: OrderedDict[str, _Learned] = OrderedDict()
        self._pinned_of: dict[str, Route] | None = None  # the catalogue's routes `_pinned_tools` was found in
        self._pinned_tools: list[types.Tool] = []

    def is_pinned(self, name: str) -> bool:
        return any(fnmatchcase(name, pattern) for pattern in self.pinned)

    def tools(self, own: list[types.Tool], client: str | None) -> list[types.Tool]:
        """tools/list for `client` (None: a request on no connection, which has no learned set): the
        pinned tools, found once per catalogue, then the client's learned ones, looked up by name."""
        if self.mode == "all":
            return own + self.catalogue.tools()
        learned = self._clients.get(client) if client is not None and self.mode == "learned" else None
        routes = [self.catalogue.resolve(name) for name in learned.shown] if learned is not None else []
        return own + self._pinned() + [route.public for route in routes if route is not None]

    def _pinned(self) -> list[types.Tool]:
        """The pinned tools of the current catalogue (a change of the catalogue replaces its routes):
        matching every pattern against every name was ~2 ms of each tools/list at 2,000 tools."""
        routes = self.catalogue.routes
        if self._pinned_of is not routes:
            self._pinned_tools = [route.public for name, route in routes.items() if self.is_pinned(name)]
            self._pinned_of = routes
        return self._pinned_tools

    def note(self, client: str | None, decision: Decision, now: float | None = None) -> bool:
        """A decision for `client`; True when its listed set changed (tell it: list_changed)."""
        if self.mode != "learned" or client is None:
            return False
        now = time.monotonic() if now is None else now
        learned = self._clients.get(client)
        if learned is None:
            if len(self._clients) >= CLIENTS:
                self._clients.popitem(last=False)
            learned = self._clients[client] = _Learned()
        else:
            self._clients.move_to_end(client)
        learned.recent.append(tuple(r.tool for r in decision.ranked))
        if now - learned.changed_at < self.interval_s:
            return False  # rate-limited: the next decision after the interval brings the set up to date
        shown = self._top(learned)
        if set(shown) == set(learned.shown):
            return False
        learned.shown, learned.changed_at = shown, now
        return True

    def _top(self, learned: _Learned) -> tuple[str, ...]:
        """The K tools ranked highest in the client's recent decisions: every decision's first pick
        (newest first), then every second pick, and so on."""
        chosen: dict[str, None] = {}
        depth = max((len(r) for r in learned.recent), default=0)
        for rank in range(depth):
            for ranked in reversed(learned.recent):
                if rank < len(ranked) and not self.is_pinned(ranked[rank]):
                    chosen.setdefault(ranked[rank])
                    if len(chosen) == self.k:
                        return tuple(chosen)
        return tuple(chosen)

    def forget(self, client: str) -> None:
        self._clients.pop(client, None)
