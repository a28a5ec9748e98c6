"""Agent sessions: what toolwise remembers between calls of one client conversation.

A session is the client connection where the transport has one (the streamable-HTTP session id;
on stdio the process serves exactly one client), otherwise the explicit `session_id` argument our
tools accept, or `_meta["toolwise/session_id"]` on a proxied call.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from toolwise.feedback import utcnow
from toolwise.rl import Decision

SESSION_META_KEY = "toolwise/session_id"
EXECUTION_META_KEY = "toolwise/execution_id"


@dataclass(slots=True)
class Call:
    execution_id: str
    tool: str
    success: bool
    latency_s: float
    reward: float | None  # None until the deferred learning has run (LearningService.drain)
    query: str | None
    previous_tool: str | None
    position: int  # session length before this call


@dataclass(slots=True)
class Session:
    id: str
    started_at: datetime = field(default_factory=utcnow)
    query: str | None = None  # the last recommend_tool query: the context of later calls
    decision: Decision | None = None  # the last recommendation not yet followed by a call
    calls: list[Call] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)  # the called tools in order (kept, not rebuilt per call)
    connection: str | None = None  # the client connection our tools were last called on for it (attribution)

    def add(self, call: Call) -> None:
        self.calls.append(call)
        self.tools.append(call.tool)

    @property
    def previous_tool(self) -> str | None:
        return self.calls[-1].tool if self.calls else None

    def latest(self, tool: str | None) -> Call | None:
        """The session's latest call (of `tool`, when given)."""
        for call in reversed(self.calls):
            if tool is None or call.tool == tool:
                return call
        return None


class Sessions:
    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self.process_default = f"stdio-{uuid.uuid4()}"

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(session_id)
        return session

    def pop(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)

    def resolve(self, explicit: str | None, meta: dict[str, Any] | None, request: Any) -> str:
        """Explicit argument, then `_meta`, then the transport's session, then this process's client."""
        if explicit:
            return explicit
        if meta and isinstance(meta.get(SESSION_META_KEY), str):
            return str(meta[SESSION_META_KEY])
        headers = getattr(request, "headers", None)
        if headers is not None and headers.get("mcp-session-id"):
            return f"http-{headers['mcp-session-id']}"
        return self.process_default
