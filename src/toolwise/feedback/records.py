"""Plain records that cross the FeedbackService boundary (written by the server, read by admins and rl)."""

from __future__ import annotations

import hashlib
import itertools
import operator
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any, Literal

Outcome = Literal["success", "partial", "failure"]
OUTCOMES: frozenset[str] = frozenset({"success", "partial", "failure"})
# The log's server column (schema.py): the longest mcpServers key a config may have (config.py).
MAX_SERVER_NAME = 128


REQUEST_PREFIX = "request-"  # the session of a request that came on no connection (with a `new_id`)
_ONE_REQUEST = re.compile(REQUEST_PREFIX + r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def one_request(session_id: str) -> bool:
    """Whether the session is one request's own (it came on no connection): no call comes after it. Its
    id is the one learning's `Sessions.resolve` makes, `request-` and a random UUID, whole: a session a client
    names `request-42` is the client's conversation like any other."""
    return _ONE_REQUEST.fullmatch(session_id.rpartition("/")[2]) is not None


class _Ids:
    """Random version-4 UUIDs, made as the keyed BLAKE2b of a counter: as unguessable as `uuid.uuid4()`
    while the key stays secret, without its `os.urandom` system call per id (which releases the GIL on
    the call's path, so the event loop may wait for another thread to hand it back)."""

    def __init__(self) -> None:
        self.rekey()
        os.register_at_fork(after_in_child=self.rekey)  # a forked child never repeats its parent's ids

    def rekey(self) -> None:
        self.key = os.urandom(32)
        self.counter = itertools.count()

    def new(self) -> str:
        x = hashlib.blake2b(next(self.counter).to_bytes(8, "little"), key=self.key, digest_size=16).hexdigest()
        variant = "89ab"[int(x[16], 16) & 3]
        return f"{x[:8]}-{x[8:12]}-4{x[13:16]}-{variant}{x[17:20]}-{x[20:]}"


_ids = _Ids()


def new_id() -> str:
    """A random UUID (version 4) in its text form."""
    return _ids.new()


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class Execution:
    """One tool execution. `arguments` is the raw input on the write side; on the read side it is the
    redacted copy when arguments are stored, else None. `argument_digest` is only read back: the writer
    stores the HMAC of the arguments keyed by the database's own salt (migration 0003), not whatever the
    record carries, and never sets it on the record it was given."""

    tool: str
    server: str
    session_id: str
    success: bool
    latency_ms: float
    started_at: datetime
    finished_at: datetime
    arguments: Mapping[str, Any] | None = None
    id: str = field(default_factory=new_id)
    namespace: str = "default"
    argument_digest: str | None = None
    context_hash: str | None = None
    query: str | None = None
    previous_tool: str | None = None
    position: int = 0
    decision_id: str | None = None
    propensity: float | None = None
    error_type: str | None = None
    error_message: str | None = None
    result_size: int = 0
    reward: float | None = None
    seq: int | None = None
    instance: str | None = None  # the toolwise instance that recorded (and learned) it
    explored: bool | None = None  # the call followed an exploratory recommendation

    def learned(self, reward: float | None, context_hash: str | None = None) -> None:
        """What learning (or a rating) made of the call: its reward (None: not learned from) and context."""
        self.reward = reward
        if context_hash is not None:
            self.context_hash = context_hash

    def recorded(self) -> None:
        """In the log now: the raw arguments go (the log keeps what the settings store of them)."""
        self.arguments = None

    def copy(self) -> Execution:
        """A copy of the record, field for field (a quarter of what `dataclasses.replace` costs: it is
        made for every call recorded, on the event loop)."""
        return Execution(*_execution_values(self))


_execution_values = operator.attrgetter(*(f.name for f in fields(Execution)))


@dataclass(slots=True, frozen=True)
class Rating:
    execution_id: str
    rating: int
    comment: str | None
    created_at: datetime
    id: int | None = None
    instance: str | None = None


@dataclass(slots=True, frozen=True)
class RatingEvent:
    """A rating as another instance (or a restart) learns it: with its execution and the rating it
    replaced, if any. `rewarded`: the rating `execution.reward` includes (`previous` as the rating is stored;
    read from the log, the execution's latest, whose rater stored the reward right after it)."""

    rating: Rating
    execution: Execution
    previous: int | None
    rewarded: int | None


@dataclass(slots=True, frozen=True)
class SnapshotRecord:
    """A stored learner snapshot. `payload` is empty in listings (only `get_snapshot` loads it);
    `covered` says which executions and ratings the state already includes."""

    namespace: str
    version: str
    policy: str
    source: str
    created_at: datetime
    sample_count: int
    covered: dict[str, Any]
    sha256: str
    payload: bytes = b""
    signature: bytes | None = None
    id: int | None = None


@dataclass(slots=True, frozen=True)
class InstanceStatus:
    """A running toolwise as others see it: heartbeat plus what it reports about itself."""

    id: str
    namespace: str
    host: str
    pid: int
    started_at: datetime
    heartbeat_at: datetime
    status: dict[str, Any]
    stopped_at: datetime | None = None


@dataclass(slots=True, frozen=True)
class Episode:
    session_id: str
    tools: list[str]
    total_reward: float
    outcome: Outcome
    started_at: datetime
    ended_at: datetime
    namespace: str = "default"
    id: str = field(default_factory=new_id)
    instance: str | None = None  # the toolwise instance that ended it (and learned its end live)
    last_execution: str | None = None  # the id of the session's last call: the step learned as terminal
    seq: int | None = None  # its place among the log's episode ends (set once stored)


@dataclass(slots=True, frozen=True)
class ToolMetrics:
    """Per-tool figures derived from the execution log; latencies in milliseconds, rates in 0..1."""

    tool: str
    calls: int
    success_rate: float
    avg_latency_ms: float
    p95_latency_ms: float
    avg_rating: float | None
    ratings: int
    last_used: datetime


@dataclass(slots=True, frozen=True)
class LogEntry:
    """An execution's place in the shared log: whose it is and where it sits in its session. Reading
    these is a fraction of the cost of whole records (no timestamps, arguments or messages to decode),
    and syncing needs whole records only for other instances' executions."""

    seq: int
    id: str
    instance: str | None
    session_id: str
    position: int
    tool: str


@dataclass(slots=True, frozen=True)
class EpisodeEnd:
    """Where the shared log says an episode ended: after `execution`, its session's last call (None
    when that record is gone, e.g. pruned), as `instance` ended it."""

    seq: int
    id: str
    instance: str | None
    execution: Execution | None


@dataclass(slots=True, frozen=True)
class CallColumns:
    """A run of the log as columns (row i of each is one execution, oldest first): what every reader of
    the log in columns (`LogColumns`, `decisions.DecisionColumns`) reads of each call."""

    seq: Sequence[int]
    session_id: Sequence[str]
    position: Sequence[int]
    tool: Sequence[str]
    success: Sequence[bool]
    latency_ms: Sequence[float]
    query: Sequence[str | None]
    previous_tool: Sequence[str | None]
    error_type: Sequence[str | None]

    def __len__(self) -> int:
        return len(self.seq)


@dataclass(slots=True, frozen=True)
class LogColumns(CallColumns):
    """The shared log's columns with what learning an execution needs: a replay learns every entry, so
    it reads these once instead of the entries and then whole records (no timestamps, arguments or
    messages decoded, no object a row)."""

    id: Sequence[str]
    instance: Sequence[str | None]


@dataclass(slots=True, frozen=True)
class ActionSummary:
    """What the log says of one tool: how often it was called and how well it did."""

    tool: str
    calls: int
    mean_reward: float | None
    success_rate: float
    explored: int  # calls that followed an exploratory recommendation


@dataclass(slots=True, frozen=True)
class TrendBucket:
    """One slice of time of the log: calls, mean reward, success rate, and the exploration rate among
    calls that followed a recommendation (None when none did)."""

    start: datetime
    end: datetime
    calls: int
    mean_reward: float | None
    success_rate: float
    exploration_rate: float | None
    recommended: int = 0  # calls made after a recommendation
    followed: int = 0  # … that called the tool recommended

    @property
    def followed_rate(self) -> float | None:
        """How often the agent called the tool toolwise recommended (None: no recommendation in the slice)."""
        return self.followed / self.recommended if self.recommended else None


@dataclass(slots=True, frozen=True)
class WriterStats:
    """Counters of the group-commit writer, for health checks and metrics."""

    enqueued: int
    committed: int
    queue_depth: int
    batches: int
    failed_batches: int
    dead_lettered: int
    failing: str | None = None  # why the database refuses writes right now (None: it takes them)
    failing_since: datetime | None = None
    damaged: str | None = None  # what the integrity check found wrong with the database file (feedback/integrity.py)

    def health(self) -> str:
        """`ok`, or since when and why the database refuses records, and what is damaged in its file
        (stats, heartbeat, inspect status)."""
        said = []
        if self.failing is not None:
            since = f" since {self.failing_since:%Y-%m-%d %H:%M:%S} UTC" if self.failing_since else ""
            said.append(f"failing{since}: {self.failing} ({self.queue_depth} records waiting)")
        if self.damaged is not None:
            said.append(f"damaged: {self.damaged}")
        return "; ".join(said) or "ok"
