"""Which decision a proxied call follows: the open recommendations of each client connection
(learning/sessions.py says how a call is attributed). A decision is open until a call is attributed
to it or its session ends; bounded per connection and in connections, all in memory: the call's path
reads no database."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from toolwise.rl import Decision

OPEN_PER_CONNECTION = 64  # older open decisions of a connection are forgotten
CONNECTIONS = 10_000  # connections with open decisions remembered (least recently used forgotten)


@dataclass(slots=True)
class OpenDecision:
    decision: Decision
    session_id: str
    query: str
    tools: frozenset[str]  # every tool the decision recommended


class OpenDecisions:
    def __init__(self, per_connection: int = OPEN_PER_CONNECTION, connections: int = CONNECTIONS) -> None:
        self.per_connection = per_connection
        self.connections = connections
        self._open: OrderedDict[str, deque[OpenDecision]] = OrderedDict()
        self._connection_of: dict[str, str] = {}  # session → the connection of its newest open decision

    def __len__(self) -> int:
        return sum(len(d) for d in self._open.values())

    def add(self, connection: str, decision: Decision, session_id: str, query: str) -> None:
        found = self._open.get(connection)
        if found is None:
            if len(self._open) >= self.connections:
                _, dropped = self._open.popitem(last=False)
                for item in dropped:
                    self._connection_of.pop(item.session_id, None)
            found = self._open[connection] = deque(maxlen=self.per_connection)
        else:
            self._open.move_to_end(connection)
        found.append(OpenDecision(decision, session_id, query, frozenset(r.tool for r in decision.ranked)))
        self._connection_of[session_id] = connection
        if len(self._connection_of) > 4 * self.connections:  # sessions never ended: keep those still open
            self._connection_of = {i.session_id: c for c, items in self._open.items() for i in items}

    def take(
        self, connection: str, tool: str, decision_id: str | None = None, session_id: str | None = None
    ) -> OpenDecision | None:
        """Close and return the decision `decision_id` names (if open on this connection), else the newest
        open one that recommended `tool` (in `session_id`, when the call names its session); None when
        there is none."""
        found = self._open.get(connection)
        if not found:
            return None
        for item in reversed(found):
            if decision_id:
                hit = item.decision.decision_id == decision_id
            else:
                hit = tool in item.tools and (session_id is None or item.session_id == session_id)
            if hit:
                found.remove(item)
                return item
        if decision_id:  # a stale or foreign id: fall back to the tool
            return self.take(connection, tool, None, session_id)
        return None

    def forget_session(self, session_id: str) -> None:
        """An ended session's decisions are no longer open."""
        connection = self._connection_of.pop(session_id, None)
        found = self._open.get(connection) if connection is not None else None
        if found:
            kept = [item for item in found if item.session_id != session_id]
            found.clear()
            found.extend(kept)
