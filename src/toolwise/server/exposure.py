"""What a client's tools/list holds (the `exposure` setting; server/discovery.py says why): in `all`
every tool; in `search` `search_tools`, `call_tool` and the pinned tools; in `learned` also the
`exposure_k` tools the policy ranked highest for the client's recent decisions, its set changed at
most once per `exposure_interval_s`. The tools toolwise knows matter are marked to stay loaded in
clients with a tool search of their own."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

import mcp_types as types

from toolwise.config import Settings
from toolwise.downstream.catalogue import Catalogue
from toolwise.downstream.routes import Route
from toolwise.rl import Decision
from toolwise.server.discovery import CALL_TOOL, SEARCH_TOOLS

ALWAYS_LOAD = "anthropic/alwaysLoad"  # the `_meta` key that keeps a tool loaded in a client's own tool search
KEPT_LOADED = ("recommend_tool", SEARCH_TOOLS, CALL_TOOL)  # own tools every client keeps loaded
CLIENTS = 10_000  # clients whose learned set is remembered (least recently used forgotten)
RECENT = 8  # decisions per client the learned set is drawn from


def kept_loaded(tool: types.Tool) -> types.Tool:
    """`tool` marked to stay loaded in a client that hides tools behind a search of its own (Claude
    Code, Copilot CLI, VS Code): `_meta["anthropic/alwaysLoad"]`, beside the `_meta` it had."""
    return tool.model_copy(update={"meta": {**(tool.meta or {}), ALWAYS_LOAD: True}})


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
        self._every_tool: list[types.Tool] = []  # the catalogue's tools, the pinned ones marked
        self._own_of: list[types.Tool] | None = None  # the own definitions `_own_marked` was made from
        self._own_marked: list[types.Tool] = []

    def is_pinned(self, name: str) -> bool:
        return any(fnmatchcase(name, pattern) for pattern in self.pinned)

    def tools(self, own: list[types.Tool], client: str | None) -> list[types.Tool]:
        """tools/list for `client` (None: a request on no connection, which has no learned set): in
        `all` every tool; else `search_tools`, `call_tool` and the pinned tools (own ones, then the
        catalogue's, found once per catalogue), then the client's learned ones, looked up by name. The
        tools toolwise knows matter (recommend_tool, the way to the rest, the pinned and the learned
        ones) are marked to stay loaded (`kept_loaded`); the rest is left to the client's own search."""
        own = self._marked_own(own)
        if self.mode == "all":
            self._pinned()
            return own + self._every_tool
        learned = self._clients.get(client) if client is not None and self.mode == "learned" else None
        routes = [self.catalogue.resolve(name) for name in learned.shown] if learned is not None else []
        shown = [kept_loaded(route.public) for route in routes if route is not None]
        return self.listed_own(own) + self._pinned() + shown

    def _marked_own(self, own: list[types.Tool]) -> list[types.Tool]:
        """toolwise's own definitions, recommend_tool, search_tools, call_tool and the pinned marked
        (made once: the definitions are fixed)."""
        if self._own_of is not own:
            keep = [t.name in KEPT_LOADED or self.is_pinned(t.name) for t in own]
            self._own_marked = [kept_loaded(t) if k else t for t, k in zip(own, keep, strict=True)]
            self._own_of = own
        return self._own_marked

    def listed_own(self, own: list[types.Tool]) -> list[types.Tool]:
        """Of toolwise's own tools, the ones tools/list holds outside `all`: the way to the rest, and the
        pinned ones (the rest are found by search_tools and called by name or through call_tool)."""
        return [t for t in own if t.name in (SEARCH_TOOLS, CALL_TOOL) or self.is_pinned(t.name)]

    def _pinned(self) -> list[types.Tool]:
        """The pinned tools of the current catalogue, matched once per catalogue (a change replaces its
        routes), not every pattern against every name on each tools/list."""
        routes = self.catalogue.routes
        if self._pinned_of is not routes:
            pinned = {name for name in routes if self.is_pinned(name)}
            self._every_tool = [kept_loaded(r.public) if n in pinned else r.public for n, r in routes.items()]
            self._pinned_tools = [tool for tool, name in zip(self._every_tool, routes, strict=True) if name in pinned]
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
