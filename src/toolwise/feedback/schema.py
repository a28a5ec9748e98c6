"""The database schema: one typed declarative model per table."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator, TypeEngine

from toolwise.feedback.records import MAX_SERVER_NAME


class SQLiteUTCText(sqlite.DATETIME):
    """A UTC time as SQLite keeps it: Python's `isoformat(" ")`, "YYYY-MM-DD HH:MM:SS[.ffffff]+00:00" (the
    fraction absent when zero). Every write and every bound uses this one form, because SQLite compares
    times as text: in two forms, a row at "12:00:00.250000" sorts before a bound at "12:00:00.250000+00:00",
    and "12:00:00+00:00" before "12:00:00.000000" (migration 0008 rewrote older rows' other form)."""

    def bind_processor(self, dialect: Dialect) -> Callable[[datetime | None], str | None]:
        return lambda value: None if value is None else value.isoformat(" ")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite keeps them as text, `SQLiteUTCText`). A
    compiled statement binds them through `type.dialect_impl(dialect).bind_processor(dialect)`."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return SQLiteUTCText()  # type: ignore[no-untyped-call]  # sqlalchemy leaves DATETIME.__init__ untyped
        return self.impl_instance  # the default: timestamptz on PostgreSQL

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware UTC datetime")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


MAX_SESSION_ID = 128  # the log's session_id columns: a longer id is kept as head and digest (learning/sessions.py)


class Base(DeclarativeBase):
    pass


class ExecutionRow(Base):
    __tablename__ = "executions"

    # `seq` orders the log (replay "everything after a snapshot"); `id` is what clients see.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    id: Mapped[str] = mapped_column(String(36), unique=True)
    namespace: Mapped[str] = mapped_column(String(64), default="default")
    session_id: Mapped[str] = mapped_column(String(MAX_SESSION_ID))
    tool: Mapped[str] = mapped_column(String(128))
    server: Mapped[str] = mapped_column(String(MAX_SERVER_NAME))
    argument_digest: Mapped[str] = mapped_column(String(64))
    arguments: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    context_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    query: Mapped[str | None] = mapped_column(Text, nullable=True)
    previous_tool: Mapped[str | None] = mapped_column(String(128), nullable=True)
    position: Mapped[int] = mapped_column(Integer, default=0)  # calls in the session before this one
    decision_id: Mapped[str | None] = mapped_column(String(36), nullable=True)
    propensity: Mapped[float | None] = mapped_column(Float, nullable=True)
    success: Mapped[bool] = mapped_column(Boolean)
    error_type: Mapped[str | None] = mapped_column(String(128), nullable=True)
    error_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    latency_ms: Mapped[float] = mapped_column(Float)
    result_size: Mapped[int] = mapped_column(Integer, default=0)
    reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime] = mapped_column(UTCDateTime)
    instance: Mapped[str | None] = mapped_column(String(36), nullable=True)  # who recorded it (and learned it live)
    explored: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # followed an exploratory recommendation

    __table_args__ = (
        Index("ix_executions_ns_tool", "namespace", "tool"),
        Index("ix_executions_ns_seq", "namespace", "seq"),  # the log's order: replay, sync, export walk it
        Index("ix_executions_session", "session_id"),
        Index("ix_executions_finished", "finished_at"),
    )


class ToolStatsRow(Base):
    """Running per-tool summaries kept with the log (`feedback/toolstats.py`): metrics in O(tools)."""

    __tablename__ = "tool_stats"

    namespace: Mapped[str] = mapped_column(String(64), primary_key=True)
    tool: Mapped[str] = mapped_column(String(128), primary_key=True)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    successes: Mapped[int] = mapped_column(Integer, default=0)
    latency_sum_ms: Mapped[float] = mapped_column(Float, default=0.0)
    last_used: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    ratings: Mapped[int] = mapped_column(Integer, default=0)
    rating_sum: Mapped[int] = mapped_column(Integer, default=0)
    reward_sum: Mapped[float] = mapped_column(Float, default=0.0)  # over the calls with a reward
    rewarded: Mapped[int] = mapped_column(Integer, default=0)  # calls with a reward (null until learned)
    explored: Mapped[int] = mapped_column(Integer, default=0)  # calls that followed an exploratory recommendation
    p95_latency_ms: Mapped[float] = mapped_column(Float, default=0.0)  # from the histogram, kept with it
    latency_offset: Mapped[int] = mapped_column(Integer, default=0)  # bucket of latency_counts[0]
    latency_counts: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)  # little-endian int64 per bucket


class RatingRow(Base):
    __tablename__ = "ratings"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    execution_id: Mapped[str] = mapped_column(String(36), ForeignKey("executions.id"), index=True)
    rating: Mapped[int] = mapped_column(Integer)
    comment: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    instance: Mapped[str | None] = mapped_column(String(36), nullable=True)


class EpisodeRow(Base):
    __tablename__ = "episodes"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)  # the order syncs learn ends in
    id: Mapped[str] = mapped_column(String(36), unique=True)
    namespace: Mapped[str] = mapped_column(String(64), default="default")
    session_id: Mapped[str] = mapped_column(String(MAX_SESSION_ID), index=True)
    tools: Mapped[list[str]] = mapped_column(JSON)
    total_reward: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime] = mapped_column(UTCDateTime)
    instance: Mapped[str | None] = mapped_column(String(36), nullable=True)  # who ended it (and learned it live)
    last_execution: Mapped[str | None] = mapped_column(String(36), nullable=True)  # the step learned as terminal

    __table_args__ = (
        Index("ix_episodes_ns_seq", "namespace", "seq"),  # the order syncs walk
        Index("ix_episodes_last_execution", "last_execution"),  # a replayed step finds the end that follows it
        Index("ix_episodes_ns_ended", "namespace", "ended_at", "id"),  # newest first, in pages (exports)
    )


class SnapshotRow(Base):
    """A learner snapshot: opaque state bytes with what is needed to trust and place them."""

    __tablename__ = "snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    namespace: Mapped[str] = mapped_column(String(64), index=True)
    version: Mapped[str] = mapped_column(String(32))
    policy: Mapped[str] = mapped_column(String(32))
    source: Mapped[str] = mapped_column(String(16))  # periodic, shutdown, restore, rollback, manual
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    sample_count: Mapped[int] = mapped_column(Integer)
    covered: Mapped[dict[str, Any]] = mapped_column(JSON)  # which executions and ratings the state includes
    sha256: Mapped[str] = mapped_column(String(64))
    signature: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    payload: Mapped[bytes] = mapped_column(LargeBinary)


class InstanceRow(Base):
    """A running toolwise: its heartbeat and what it reports (downstreams, circuits, policy)."""

    __tablename__ = "instances"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    namespace: Mapped[str] = mapped_column(String(64))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime)
    stopped_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    status: Mapped[dict[str, Any]] = mapped_column(JSON)


class SecretRow(Base):
    """Values made once per database and never shown: the salt of the argument digest."""

    __tablename__ = "secrets"

    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(128))
