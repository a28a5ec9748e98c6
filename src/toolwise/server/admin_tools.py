"""The admin tools that report: what the learner knows (get_learning_stats), per-tool metrics, frequent sequences."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter

from toolwise.downstream.connection import Health
from toolwise.downstream.naming import meant
from toolwise.feedback import StoreUnavailableError, ToolMetrics
from toolwise.learning.sessions import Session
from toolwise.server.own import Input, NoInput, Output
from toolwise.server.schemas import checked_per_row
from toolwise.server.services import Services
from toolwise.server.stats import learning_stats

log = logging.getLogger(__name__)


class LearningStatsOutput(Output):
    policy: str
    serving: str = Field(description="What answers recommend_tool: the policy, or the baseline in shadow mode.")
    namespace: str
    instance: str
    tools: int
    decisions: int
    calls: int
    updates: int = Field(
        description="Learner updates: one per call learned, one more per rating (and per ended session, TD policies)."
    )
    mean_reward: float | None = Field(
        description="Mean reward per call recorded in the namespace: each call's current reward, after its "
        "ratings (the figure submit_feedback reports for one call)."
    )
    mean_update_reward: float | None = Field(
        description="Mean reward per learner update: a rated call counts once unrated and once rated."
    )
    exploration_rate: float | None = Field(description="Share of recommendations that explored.")
    epsilon: float = Field(description="The exploration rate now: it rises when rewards fall (adaptive ε).")
    epsilon_reason: str = Field(description="Why ε is what it is.")
    reopened_tools: list[str] = Field(description="Tools the drift guard re-opened to exploration.")
    drifts: list[str] = Field(description="The newest changes of a tool's rewards the drift guard saw.")
    replay_size: int
    sequences: int
    open_sessions: int
    queued_records: int
    committed_records: int
    failed_batches: int
    dead_lettered: int
    store: str = Field(description="`ok`, or since when and why the database refuses records.")
    synced: int = Field(description="Executions and ratings learned from the shared log (other instances, restarts).")
    snapshot_id: int | None
    open_circuits: list[str]
    shielded_tools: dict[str, str] = Field(description="Tools left out of recommendations, with why.")
    downstreams: list[Health]

    def text(self) -> str:
        health = ", ".join(f"{d.server}: {d.state} (circuit {d.circuit})" for d in self.downstreams)
        mean = "n/a" if self.mean_reward is None else f"{self.mean_reward:.2f}"
        per_update = "n/a" if self.mean_update_reward is None else f"{self.mean_update_reward:.2f}"
        return (
            f"serving {self.serving}, {self.tools} tools, {self.decisions} decisions, {self.calls} calls, "
            f"mean reward {mean} per recorded call ({per_update} over {self.updates} learner updates); "
            f"exploration: {self.epsilon_reason}; downstreams: {health}"
        )


class ToolMetricsInput(Input):
    tool: str | None = None
    limit: int | None = Field(default=None, ge=1, description="the most called first (default: all, by name)")


@dataclass(frozen=True, slots=True)
class RenderedMetrics:
    """One ToolMetrics as it is answered: its JSON values and its line of text."""

    metrics: ToolMetrics
    row: dict[str, Any]
    line: str


_METRICS_ROW = TypeAdapter(ToolMetrics)
_rendered: dict[int, RenderedMetrics] = {}  # by id() of the ToolMetrics, which the entry keeps alive


def rendered(metrics: list[ToolMetrics]) -> list[RenderedMetrics]:
    """The rows of an answer, each rendered once: the store serves the same ToolMetrics objects until
    the summaries change, so an unchanged row costs a lookup, not a serialization. Only the latest
    answer's rows are kept beyond a bound."""
    out = []
    for m in metrics:
        hit = _rendered.get(id(m))
        if hit is None or hit.metrics is not m:
            line = f"{m.tool}: {m.calls} calls, {m.success_rate:.0%} success, p95 {m.p95_latency_ms:.0f} ms"
            rating = f", rated {m.avg_rating:.1f}" if m.avg_rating is not None else ""
            hit = _rendered[id(m)] = RenderedMetrics(m, _METRICS_ROW.dump_python(m, mode="json"), line + rating)
        out.append(hit)
    if len(_rendered) > 2 * len(out) + 1000:  # the summaries changed many times: keep only this answer's
        _rendered.clear()
        _rendered.update((id(r.metrics), r) for r in out)
    return out


class ToolMetricsOutput(Output):
    metrics: list[ToolMetrics] = Field(json_schema_extra=checked_per_row(ToolMetrics))
    _tool: str | None = PrivateAttr(default=None)  # the tool asked for: an empty answer is about it alone
    _meant: str = PrivateAttr(default="")  # `; did you mean 'server__tool'?` when `_tool` is not listed

    def text(self) -> str:
        if not self.metrics:
            return (
                f"No executions of {self._tool!r} recorded{self._meant or '.'}"
                if self._tool
                else "No executions recorded yet."
            )
        return "\n".join(r.line for r in rendered(self.metrics))

    def structured(self) -> dict[str, Any]:
        return {"metrics": [r.row for r in rendered(self.metrics)]}


class SequencesInput(Input):
    tool: str | None = None
    limit: int = Field(default=10, ge=1, le=100)


class SequenceItem(BaseModel):
    sequence: list[str]
    count: int
    success_rate: float
    mean_reward: float
    description: str


class SequencesOutput(Output):
    sequences: list[SequenceItem]

    def text(self) -> str:
        return "\n".join(s.description for s in self.sequences) or "No sequence seen twice yet."


async def get_learning_stats(services: Services, args: NoInput, session: Session) -> LearningStatsOutput:
    stats = await learning_stats(services)
    try:
        mean = await services.feedback.reports.mean_reward(stats.namespace)
    except StoreUnavailableError as exc:  # the rest answers from memory; `store` says what fails
        log.warning("get_learning_stats: no mean reward per call while %s", exc)
        mean = None
    return LearningStatsOutput.model_validate(replace(stats, mean_reward=mean), from_attributes=True)


async def get_tool_metrics(services: Services, args: ToolMetricsInput, session: Session) -> ToolMetricsOutput:
    namespace = services.learning.namespace
    found = await services.feedback.reports.get_tool_metrics(args.tool, namespace=namespace, limit=args.limit)
    answer = ToolMetricsOutput(metrics=found)
    answer._tool = args.tool
    if not found and args.tool is not None:
        listed = services.learning.learner.index.active_names
        answer._meant = "" if args.tool in listed else meant(args.tool, listed)
    return answer


async def get_successful_sequences(services: Services, args: SequencesInput, session: Session) -> SequencesOutput:
    # read on the learning thread: the event loop serves on while it learns a run of calls (learning_stats)
    rows = await services.learning.read_learned(lambda learner: learner.sequences.top_sequences(args.tool, args.limit))
    return SequencesOutput(
        sequences=[
            SequenceItem(
                sequence=[*r.prefix, r.tool],
                count=r.count,
                success_rate=r.success_rate,
                mean_reward=r.mean_reward,
                description=r.reason,
            )
            for r in rows
        ]
    )
