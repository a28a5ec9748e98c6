"""Agent sessions: what toolwise remembers between calls of one client conversation.

A session is the explicit `session_id` argument our tools accept (or `_meta["toolwise/session_id"]`
on a proxied call), otherwise the client connection (`downstream/callers.py`); a request that has no
connection (2026-07-28 over HTTP) is a session of its own, never kept, never shared.

Sessions belong to a client (its principal, `Callers.principal`): the id a client names is scoped to
it (`scoped`: "s1" of the client `http-ab…` is `http-ab…/s1` in memory and in the log), so another
client naming the same string gets a session of its own, and whose a logged call is can be read
from its session id (`owns`). The one client of a stdio server owns everything: nothing is scoped.

Which decision a proxied call follows (`OpenDecisions`, learning/open_decisions.py): the open
recommendations of each client connection. Agent frameworks keep conversations apart on one connection
by passing `session_id` to our tools, then call the downstream tools as any MCP client does: no
`session_id`, no `_meta`. Such a call
belongs to the conversation its connection named last (`Sessions.current`), or the one
`_meta["toolwise/session_id"]` names, whatever was recommended; it follows the newest open decision
in that conversation that recommended the called tool (or the decision named by
`_meta["toolwise/decision_id"]`), and is learned with that decision's query. A connection that never
named a conversation is one: its calls follow the newest matching decision on it. A decision is open
until a call is attributed to it or its session ends. All in memory, bounded per connection and in
connections: the call's path reads no database.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from mcp_types import RequestParamsMeta

from toolwise.downstream.errors import CircuitOpenError, DownstreamError, InvalidArgumentsError, RefusedCallerError
from toolwise.feedback import Execution, utcnow
from toolwise.feedback.arguments import storable
from toolwise.feedback.records import REQUEST_PREFIX, CallColumns, new_id, one_request
from toolwise.feedback.schema import MAX_SESSION_ID
from toolwise.learning.open_decisions import OpenDecision, OpenDecisions
from toolwise.rl import Decision, Step, StepColumns
from toolwise.rl.steps import ARGUMENTS, FIT, HEALTH

SESSION_META_KEY = "toolwise/session_id"
EXECUTION_META_KEY = "toolwise/execution_id"
NAMED_CONNECTIONS = 10_000  # connections whose last-named conversation is remembered (least recent forgotten)
DECISION_META_KEY = "toolwise/decision_id"
OPEN_SESSIONS = 10_000  # sessions kept in memory (least recently used forgotten: their calls are in the log)
DIGEST = 24  # hex digits of the digest that stands for the tail of a longer id

# re-exported: learning/core.py and service.py import them from here (the module's own names are public too)
__all__ = ["OpenDecision", "OpenDecisions"]


def scoped(owner: str | None, name: str) -> str:
    """The id of the session `owner` calls `name` (`name` itself when it is already `owner`'s), at most
    `MAX_SESSION_ID` characters: a longer one keeps its head and a digest of the whole (the same id for the
    same name; the log's column holds no more, and PostgreSQL refused the batch that carried it)."""
    name = storable(name)  # half a surrogate pair (an id cut mid-character) is no text a database stores
    full = name if owner is None or owns(owner, name) else f"{owner}/{name}"
    if len(full) <= MAX_SESSION_ID:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:DIGEST]
    return f"{full[: MAX_SESSION_ID - DIGEST - 1]}~{digest}"


def owns(owner: str | None, session_id: str) -> bool:
    """Whether the session `session_id` (in memory or in the log) is `owner`'s: its connection's own
    session, or one it named. The one client of a server serving alone (None) owns every session."""
    return owner is None or session_id == owner or session_id.startswith(f"{owner}/")


def session_meta(session: str) -> RequestParamsMeta:
    """The `_meta` that files a plain call under a conversation (what an agent framework sends)."""
    return cast(RequestParamsMeta, {SESSION_META_KEY: session})


@dataclass(slots=True)
class Call:
    """One proxied tools/call on its way from the handler to the log and the learner: its record
    (`execution`, every fact the log keeps, in the log's names and units) and what only memory holds
    until it is learned: the tools called just before it and the recommendation it followed or passed
    over. Its session keeps the record (`Session.calls`)."""

    execution: Execution  # `query` is the context it is learned in (the log keeps it once: `stored`)
    history: tuple[str, ...]  # the tools called just before it (the sequence model's prefix)
    decision: Decision | None  # the recommendation before it (dropped once recorded)
    owner: str | None = None  # the client that made it (its session's)
    after_failure: bool = False  # its session's call before it failed
    unlearnable: bool = False  # neither learned nor rewarded (a malformed step): recorded without, not tried again

    def step(self, n: int) -> Step:
        """The learner's view of this call."""
        decision, tool = self.decision, self.execution.tool
        passed_over = decision.chosen if decision is not None and decision.chosen != tool else None
        followed = decision is not None and decision.chosen == tool
        return step_of(
            self.execution,
            self.history,
            n,
            passed_over=passed_over,
            after_failure=self.after_failure,
            followed=followed,
        )

    def stored(self) -> Execution:
        """A copy of the record for the log (the writer holds it until committed, while the session's
        record sheds its arguments): the session's query only on the call right after a recommendation;
        the session's later calls find it there (`learning.service.with_session_query`)."""
        stored = self.execution.copy()
        if stored.decision_id is None:
            stored.query = None
        return stored

    def recorded(self) -> None:
        """In the log now: the session keeps what later steps and ratings use, not the arguments or
        the decision."""
        self.execution.recorded()
        self.decision = None


@dataclass(slots=True)
class Session:
    """`calls` and `tools` hold the session's recent calls only (at least `window`, at most twice that:
    trimmed in steps, so a call costs O(1)); `length` counts them all. Calls older than the window are
    in the log; rating them by tool name needs their execution id instead."""

    id: str
    window: int = 256
    started_at: datetime = field(default_factory=utcnow)
    query: str | None = None  # the last recommend_tool query: the context of later calls
    decision: Decision | None = None  # the last recommendation not yet followed by a call
    calls: list[Execution] = field(default_factory=list)  # the records of its recent calls
    tools: list[str] = field(default_factory=list)  # the recent called tools in order (kept, not rebuilt per call)
    dropped: int = 0  # calls trimmed off the front of `calls`
    reward_total: float = 0.0  # the rewards of all its calls, added as they are learned (and rated)
    connection: str | None = None  # the client connection our tools were last called on for it (attribution)
    owner: str | None = None  # the client it belongs to (None: the one client of a server serving alone)

    @property
    def name(self) -> str:
        """The id as its client named it (without the scope `scoped` added)."""
        prefix = f"{self.owner}/"
        return self.id[len(prefix) :] if self.owner is not None and self.id.startswith(prefix) else self.id

    @property
    def length(self) -> int:
        """Calls made in this session (the position of the next one)."""
        return self.dropped + len(self.calls)

    def recommended(self, query: str | None, decision: Decision) -> None:
        """`recommend_tool` answered `query` with `decision`: the context of the calls that follow."""
        self.query, self.decision = query, decision

    def follow(self, decision: Decision | None = None) -> Decision | None:
        """A call follows `decision` (the session's open one when None): it is no longer open.
        Returns the decision the call follows."""
        followed = self.decision if decision is None else decision
        if self.decision is followed:
            self.decision = None
        return followed

    def rewarded(self, change: float) -> None:
        """One of its calls was learned (or re-rated): its reward, or the change to it, counts."""
        self.reward_total += change

    def seen_on(self, connection: str) -> None:
        """Our tools were called for it on `connection`: plain calls there are attributed to it."""
        self.connection = connection

    def add(self, call: Execution) -> None:
        self.calls.append(call)
        self.tools.append(call.tool)
        if len(self.calls) > 2 * self.window:
            cut = len(self.calls) - self.window
            self.dropped += cut
            del self.calls[:cut], self.tools[:cut]

    @property
    def previous_tool(self) -> str | None:
        return self.calls[-1].tool if self.calls else None

    def recent(self, end: int, n: int) -> tuple[str, ...]:
        """The (up to) `n` tools called before position `end`, while this session still holds them."""
        end -= self.dropped
        return tuple(self.tools[max(end - n, 0) : end]) if 0 <= end <= len(self.tools) else ()

    def failed_before(self, position: int) -> bool:
        """Whether its call just before `position` failed (False when it is no longer among the recent)."""
        at = position - 1 - self.dropped
        return 0 <= at < len(self.calls) and not self.calls[at].success

    def tried_for(self, query: str) -> tuple[str, ...]:
        """The different tools its latest calls, made in a row for `query` (the request they were made for, the
        same text but for case and spacing), tried and failed with, the first first; none when one of them
        worked. A failure that is the downstream's health or refused arguments says nothing of the tool's fit
        (rl/hindsight.py); a tool called again counts once (rl/fit.py's `tried_unfit` reads them). Reads back
        only that run of calls, not the session's window."""
        wanted = folded(query)
        tried: dict[str, None] = {}
        for call in reversed(self.calls):
            if call.query is None or (call.query != query and folded(call.query) != wanted):
                break
            if call.success:
                return ()
            if fault_of(call.error_type) == FIT:
                tried[call.tool] = None
        return tuple(reversed(tried))

    def find(self, execution_id: str) -> Execution | None:
        """The recent call with this execution id."""
        for call in reversed(self.calls):
            if call.id == execution_id:
                return call
        return None

    def latest(self, tool: str | None) -> Execution | None:
        """The session's latest call (of `tool`, when given)."""
        for call in reversed(self.calls):
            if tool is None or call.tool == tool:
                return call
        return None


class Sessions:
    """Open sessions, and which conversation each client connection is in: the `session_id` it named
    last on one of our tools. Agent frameworks name the conversation on our tools and call the
    downstream tools plainly; a plain call belongs to the conversation its connection named last
    (or the one its `_meta` names), so two conversations on one connection stay two chains."""

    def __init__(self, window: int = 256) -> None:
        # A client may name sessions it never ends (a conversation each, on a stdio connection that never
        # closes): past `OPEN_SESSIONS`, the least recently used is forgotten, as if it had ended unsaid.
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self.limit = OPEN_SESSIONS
        self.window = window  # recent calls each session keeps in memory
        self._named: OrderedDict[str, str] = OrderedDict()  # connection → the session it named last

    def name(self, connection: str | None, session_id: str) -> None:
        """`connection` named `session_id` on one of our tools: its plain calls now belong there."""
        if connection is None or connection == session_id:
            return
        self._named[connection] = session_id
        self._named.move_to_end(connection)
        if len(self._named) > NAMED_CONNECTIONS:
            self._named.popitem(last=False)

    def current(self, connection: str | None) -> str | None:
        """The conversation `connection` is in: the session it named last, else its own (None: no
        connection)."""
        return self._named.get(connection, connection) if connection is not None else None

    def unname(self, session_id: str) -> None:
        """`session_id` ended: connections in it are back in their own session."""
        for connection in [c for c, named in self._named.items() if named == session_id]:
            del self._named[connection]

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str, owner: str | None = None) -> Session:
        """The open session `session_id` (opened for `owner` if it is not)."""
        if one_request(session_id):
            return Session(session_id, owner=owner)  # one request's own: nothing after it can refer to it
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(session_id, self.window, owner=owner)
            if len(self._sessions) > self.limit:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(session_id)
        return session

    def find(self, session_id: str) -> Session | None:
        """The session if it is open (`get` would open it)."""
        return self._sessions.get(session_id)

    def pop(self, session_id: str) -> Session | None:
        return self._sessions.pop(session_id, None)

    def resolve(
        self, explicit: str | None, meta: dict[str, Any] | None, client: str | None, owner: str | None = None
    ) -> str:
        """Explicit argument, then `_meta` (either scoped to `owner`), then `client` (the conversation
        the connection is in, `current`), else a session for this request alone."""
        if explicit:
            return scoped(owner, explicit)
        if meta and isinstance(meta.get(SESSION_META_KEY), str):
            return scoped(owner, str(meta[SESSION_META_KEY]))
        return client if client is not None else scoped(owner, f"{REQUEST_PREFIX}{new_id()}")


FAULTS = {
    DownstreamError.__name__: HEALTH,  # no answer in time, the connection lost: the server's state
    CircuitOpenError.__name__: HEALTH,
    InvalidArgumentsError.__name__: ARGUMENTS,
    RefusedCallerError.__name__: ARGUMENTS,
}


def folded(text: str) -> str:
    """`text` as `Session.tried_for` compares requests: lower case, runs of white space as one space."""
    return " ".join(text.lower().split())


def fault_of(error_type: str | None) -> str | None:
    """Why a call failed as learning reads it (rl/hindsight.py): None for a success; a tool's error
    answer or broken output (and whatever else) may be its fit."""
    return None if error_type is None else FAULTS.get(error_type, FIT)


def step_of(
    execution: Execution,
    history: Sequence[str],
    n: int,
    *,
    rating: int | None = None,
    passed_over: str | None = None,
    after_failure: bool = False,
    followed: bool = False,
) -> Step:
    """The learner's view of a call's record, live or read back from the log, with (up to) `n` tools
    before it (`recent`): the one place a record becomes a `Step`."""
    return Step(
        execution.tool,
        execution.success,
        execution.latency_ms,
        query=execution.query,
        previous_tool=execution.previous_tool,
        position=execution.position,
        history=recent(history, execution.previous_tool, n),
        rating=rating,
        passed_over=passed_over,
        session=None if one_request(execution.session_id) else execution.session_id,  # no next call to wait for
        fault=fault_of(execution.error_type),
        after_failure=after_failure,
        followed=followed,
    )


def step_columns(
    batch: CallColumns,
    rows: Sequence[int],
    histories: Sequence[Sequence[str]],
    queries: Sequence[str | None],
    n: int,
    after_failure: Sequence[bool] | None = None,
) -> StepColumns:
    """The learner's view of rows `rows` of a batch of the log's columns, each with the tools before
    it in its session (`histories`, cut to `n` as `step_of` does) and its query: what `step_of` is
    to one record, for columns."""
    previous = [batch.previous_tool[i] for i in rows]
    return StepColumns(
        [batch.tool[i] for i in rows],
        [batch.success[i] for i in rows],
        [batch.latency_ms[i] for i in rows],
        queries,
        previous,
        [recent(history, before, n) for history, before in zip(histories, previous, strict=True)],
        [batch.position[i] for i in rows],
        session=[None if one_request(batch.session_id[i]) else batch.session_id[i] for i in rows],  # as step_of
        fault=[fault_of(batch.error_type[i]) for i in rows],
        after_failure=after_failure,
    )


def recent(history: Sequence[str], previous_tool: str | None, n: int) -> tuple[str, ...]:
    """The (up to) `n` tools before a call: its session's, else the previous tool its record names."""
    if not history and previous_tool:
        history = (previous_tool,)
    return tuple(history[max(len(history) - n, 0) :])
