"""toolwise's own MCP tools. Inputs and outputs are pydantic models: the JSON schemas clients see are
generated from them, inputs are validated by them, and each output renders a short text too."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from toolwise.downstream.connection import Health
from toolwise.feedback import StoreUnavailableError, ToolMetrics
from toolwise.feedback.records import SnapshotRecord
from toolwise.learning import snapshots as snapshot_files
from toolwise.learning.sessions import Session
from toolwise.rl import Decision, Ranked, UnknownToolError
from toolwise.server.evaluation import EVALUATE_TOOL
from toolwise.server.own import SESSION_FIELD, Input, Output, OwnTool
from toolwise.server.rating import call_to_rate
from toolwise.server.services import Services
from toolwise.server.stats import learning_stats

log = logging.getLogger(__name__)

# -- recommend_tool ---------------------------------------------------------------------------------


class RecommendToolInput(Input):
    query: str = Field(min_length=1, description="the task, in words")
    top_k: int = Field(default=5, ge=1, le=50)
    candidates: list[str] | None = Field(default=None, description="only these tools")
    session_id: str | None = SESSION_FIELD


class Recommendation(BaseModel):
    tool: str
    score: float = Field(description="The policy's ranking score (expected reward plus exploration).")
    confidence: float = Field(
        description="In 0..1, from what was learned: the probability that a call of this tool works for this "
        "request (the default policy, `outcome`: calibrated on the outcomes seen), the probability this is the "
        "tool the agent wants (policy `choice`), or the expected normalised reward (the reward-learning policies)."
    )
    p_agent: float | None = Field(
        default=None, description="The probability the agent calls this tool here (what the choice model learned)."
    )
    evidence: float | None = Field(
        default=None, description="The calls (similarity-weighted) `confidence` rests on; 0: the prior alone."
    )
    relevance: float = Field(description="Lexical/sequence relevance to the query in 0..1 (the prior).")
    reason: str
    explored: bool
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Argument values successful calls of this tool used for similar requests (with "
        "store_arguments on; secrets never): a starting point, not a guess at every parameter.",
    )


class RecommendToolOutput(Output):
    decision_id: str
    context_hash: str
    policy: str
    explored: bool
    propensity: float
    session_id: str
    nothing_fits: bool = Field(
        default=False,
        description="No tool seems to serve this request (the best relevance is low: rl/fit.py); the "
        "recommendations are best guesses.",
    )
    recommendations: list[Recommendation]

    def text(self) -> str:
        lines = [nothing_fits_line(self.recommendations[0].tool)] if self.nothing_fits and self.recommendations else []
        lines.append(f"Recommended ({self.policy}, decision {self.decision_id}):")
        for i, r in enumerate(self.recommendations, 1):
            lines.append(f"{i}. {r.tool} — {r.reason}")
            if r.arguments:
                lines.append("   worked before: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in r.arguments.items()))
        return "\n".join(lines)


def nothing_fits_line(best: str) -> str:
    """The first line of an answer whose decision says no tool fits (recommend_tool, search_tools)."""
    return f"No tool seems to fit this request; best guess: {best}."


SUGGESTED = 3  # recommendations that carry argument suggestions (each looks through its tool's memory)
PRIOR_CALLS = 20  # learned calls the reported probability's uniform start counts as


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a reported probability rests on: calls learned (learner updates) and tools to choose from."""

    calls: int
    choices: int


def evidence_of(services: Services, candidates: list[str] | None) -> Evidence:
    learner = services.learning.learner
    return Evidence(learner.updates, len(set(candidates)) if candidates else len(learner.index.active))


def confidence_of(decision: Decision, ranked: Ranked, evidence: Evidence) -> float:
    """The confidence reported for a ranked tool, in 0..1. The choice model's softmax over the prior's text
    scores says 0.9 before a call was learned (its weights set the scale, not the data), so its probability
    is shrunk toward uniform over the choices by the evidence: n/(n + PRIOR_CALLS) of it after n learned calls."""
    expected = min(1.0, max(0.0, ranked.expected))
    if decision.policy != "choice":  # outcome: P(works), already shrunk to its prior by its evidence
        return expected
    n, uniform = evidence.calls, 1.0 / max(evidence.choices, 1)
    return (n * expected + PRIOR_CALLS * uniform) / (n + PRIOR_CALLS)


def reason_of(decision: Decision, ranked: Ranked, evidence: Evidence) -> str:
    """Why a tool ranks where it does in a decision (recommend_tool, search_tools)."""
    exploring = " (exploring)" if decision.explored and ranked.tool == decision.chosen else ""
    if ranked.p_agent is not None and ranked.evidence is not None:
        works = f"probability {ranked.expected:.2f} it works"
        basis = f"on {ranked.evidence:.1f} similar calls" if ranked.evidence >= 0.05 else "before any similar call"
        return f"relevance {ranked.prior:.2f}, {works} ({basis}), {ranked.p_agent:.2f} the agent picks it{exploring}"
    if decision.policy == "choice":  # its estimate is the probability that this is the tool wanted
        confidence = confidence_of(decision, ranked, evidence)
        return f"relevance {ranked.prior:.2f}, probability {confidence:.2f} it is the one{exploring}"
    # The estimate is a regression's: it can overshoot the scale it estimates, shown clipped to it.
    expected = min(1.0, max(0.0, ranked.expected))
    return f"relevance {ranked.prior:.2f}, expected reward {expected:.2f} of 1{exploring}"


# -- recommend_next_tools ---------------------------------------------------------------------------


class RecommendNextInput(Input):
    recent_tools: list[str] | None = Field(default=None, description="default: the session's calls")
    last_failed: bool | None = Field(default=None, description="default: whether the session's last call failed")
    top_k: int = Field(default=5, ge=1, le=50)
    session_id: str | None = SESSION_FIELD


class NextRecommendation(BaseModel):
    tool: str
    score: float = Field(description="= p_agent")
    p_agent: float = Field(description="P(the agent calls it next, a retry included)")
    p_works: float = Field(description="P(that call works)")
    count: int
    success_rate: float
    mean_reward: float
    reason: str


class RecommendNextOutput(Output):
    session_id: str
    recent_tools: list[str]
    recommendations: list[NextRecommendation]

    def text(self) -> str:
        if not self.recommendations:
            return "No call has been made yet: nothing to suggest."
        return "\n".join(f"{r.tool}: {r.reason}" for r in self.recommendations)


# -- submit_feedback --------------------------------------------------------------------------------


class SubmitFeedbackInput(Input):
    rating: int = Field(ge=1, le=5, strict=True)
    execution_id: str | None = None
    # else the newest call of `tool`: in session_id if given, else in this connection, else the newest
    # made in the last 10 minutes (not in another open session)
    tool: str | None = None
    comment: str | None = Field(default=None, max_length=4000)
    session_id: str | None = SESSION_FIELD


class SubmitFeedbackOutput(Output):
    execution_id: str
    tool: str
    rating: int
    reward: float

    def text(self) -> str:
        return f"Rated {self.tool} {self.rating}/5 (execution {self.execution_id}); reward is now {self.reward:.2f}."


# -- end_session ------------------------------------------------------------------------------------


class EndSessionInput(Input):
    outcome: Literal["success", "partial", "failure"]
    session_id: str | None = SESSION_FIELD


class EndSessionOutput(Output):
    session_id: str
    outcome: str
    tools: list[str]
    total_reward: float

    def text(self) -> str:
        return (
            f"Session {self.session_id} ended ({self.outcome}): {' → '.join(self.tools)}, "
            f"total reward {self.total_reward:.2f}."
        )


# -- admin ------------------------------------------------------------------------------------------


class NoInput(Input):
    pass


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


def checked_per_row(row: type[Any]) -> Callable[[dict[str, Any]], None]:
    """A `json_schema_extra` for a list field that may hold thousands of `row`s (one per tool): a row
    is declared as an object that has every field of `row` (their types and units in its description),
    not with a schema per field, so a client that validates structured content against the output
    schema (the SDK's client does, with jsonschema, on every call) takes one step per row, not one per
    value, which was most of a large get_tool_metrics answer. The server builds the rows with the
    pydantic model, so the values have the types described."""

    def extra(schema: dict[str, Any]) -> None:
        full = TypeAdapter(row).json_schema()
        fields = "; ".join(f"{name}: {type_of(spec, full)}" for name, spec in full["properties"].items())
        schema["items"] = {
            "type": "object",
            "title": full["title"],
            "description": f"{full.get('description', '')} Fields: {fields}.".strip(),
            "required": full["required"],
        }

    return extra


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

    def text(self) -> str:
        if not self.metrics:
            return "No executions recorded yet."
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


# -- the handlers: plain functions of the running services, the validated input and the session ------


def _known(services: Services, names: list[str]) -> None:
    unknown = [n for n in names if n not in services.learning.learner.index.tools]
    if unknown:
        raise UnknownToolError(unknown)


async def recommend_tool(services: Services, args: RecommendToolInput, session: Session) -> RecommendToolOutput:
    d = services.agent.recommend(session, args.query, args.top_k, args.candidates)
    evidence = evidence_of(services, args.candidates)
    recs = [
        Recommendation(
            tool=r.tool,
            score=r.score,
            confidence=confidence_of(d, r, evidence),
            p_agent=r.p_agent,
            evidence=r.evidence,
            relevance=r.prior,
            reason=reason_of(d, r, evidence),
            explored=d.explored and r.tool == d.chosen,
            arguments={a.name: a.value for a in services.agent.suggest_arguments(r.tool, args.query, session.owner)}
            if rank < SUGGESTED
            else {},
        )
        for rank, r in enumerate(d.ranked)
    ]
    return RecommendToolOutput(
        decision_id=d.decision_id,
        context_hash=d.context_hash,
        policy=d.policy,
        explored=d.explored,
        propensity=d.propensity,
        session_id=session.name,
        nothing_fits=d.nothing_fits,
        recommendations=recs,
    )


async def recommend_next_tools(services: Services, args: RecommendNextInput, session: Session) -> RecommendNextOutput:
    recent = session.tools if args.recent_tools is None else args.recent_tools
    _known(services, recent)
    last_failed = args.last_failed
    if last_failed is None:
        last_failed = args.recent_tools is None and bool(session.calls) and not session.calls[-1].success
    with services.learning.lock:
        learner = services.learning.learner  # looked up on every call: restoring a snapshot replaces it
        found = learner.recommend_next(recent, learner.index.active_names, args.top_k, after_failure=last_failed)
    return RecommendNextOutput(
        session_id=session.name,
        recent_tools=recent,
        recommendations=[NextRecommendation.model_validate(n, from_attributes=True) for n in found],
    )


async def submit_feedback(services: Services, args: SubmitFeedbackInput, session: Session) -> SubmitFeedbackOutput:
    execution_id = args.execution_id
    if args.tool is not None:
        _known(services, [args.tool])
        if execution_id is None:
            named = args.session_id is not None
            execution_id, session = await call_to_rate(services, session, args.tool, named=named)
    execution, reward = await services.agent.rate(session, args.rating, execution_id, None, args.comment)
    return SubmitFeedbackOutput(execution_id=execution.id, tool=execution.tool, rating=args.rating, reward=reward)


async def end_session(services: Services, args: EndSessionInput, session: Session) -> EndSessionOutput:
    episode = await services.agent.end_session(session.id, args.outcome, shown=session.name)
    return EndSessionOutput.model_validate(replace(episode, session_id=session.name), from_attributes=True)


async def get_learning_stats(services: Services, args: NoInput, session: Session) -> LearningStatsOutput:
    stats = learning_stats(services)
    try:
        mean = await services.feedback.reports.mean_reward(stats.namespace)
    except StoreUnavailableError as exc:  # the rest answers from memory; `store` says what fails
        log.warning("get_learning_stats: no mean reward per call while %s", exc)
        mean = None
    return LearningStatsOutput.model_validate(replace(stats, mean_reward=mean), from_attributes=True)


async def get_tool_metrics(services: Services, args: ToolMetricsInput, session: Session) -> ToolMetricsOutput:
    namespace = services.learning.namespace
    found = await services.feedback.reports.get_tool_metrics(args.tool, namespace=namespace, limit=args.limit)
    return ToolMetricsOutput(metrics=found)


async def get_successful_sequences(services: Services, args: SequencesInput, session: Session) -> SequencesOutput:
    with services.learning.lock:
        rows = services.learning.learner.sequences.top_sequences(args.tool, args.limit)
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


# -- snapshots (admin, off unless `snapshot_tools`) ---------------------------------------------------


class SnapshotInfo(BaseModel):
    id: int | None
    version: str
    policy: str
    source: str
    created_at: str
    sample_count: int
    sha256: str
    signed: bool


def snapshot_info(record: SnapshotRecord) -> SnapshotInfo:
    return SnapshotInfo(
        id=record.id,
        version=record.version,
        policy=record.policy,
        source=record.source,
        created_at=record.created_at.isoformat(),
        sample_count=record.sample_count,
        sha256=record.sha256,
        signed=record.signature is not None,
    )


class SnapshotListOutput(Output):
    namespace: str
    current: int | None = Field(description="The snapshot the running state was loaded from or last saved as.")
    snapshots: list[SnapshotInfo]

    def text(self) -> str:
        lines = [f"{len(self.snapshots)} snapshots of {self.namespace!r} (current: {self.current})"]
        lines += [f"#{s.id} {s.created_at} {s.source} v{s.version} {s.sample_count} samples" for s in self.snapshots]
        return "\n".join(lines)


class SnapshotDumpInput(Input):
    output: str | None = Field(
        default=None, description="Also write it to this file, a name relative to the server's snapshot directory."
    )
    overwrite: bool = Field(default=False, description="Replace the file if it exists (refused otherwise).")


class SnapshotOutput(Output):
    snapshot: SnapshotInfo
    path: str | None = None

    def text(self) -> str:
        s = self.snapshot
        where = f", written to {self.path}" if self.path else ""
        return f"snapshot #{s.id} ({s.source}, {s.sample_count} samples, sha256 {s.sha256[:12]}…){where}"


class SnapshotRestoreInput(Input):
    snapshot_id: int | None = Field(default=None, description="A stored snapshot to restore (see snapshot_list).")
    input: str | None = Field(
        default=None, description="A snapshot file to restore, a name relative to the server's snapshot directory."
    )
    previous: bool = Field(default=False, description="Roll back to the snapshot before the current one.")


async def snapshot_list(services: Services, args: NoInput, session: Session) -> SnapshotListOutput:
    namespace = services.learning.namespace
    listed = await services.feedback.snapshots.list(namespace)
    return SnapshotListOutput(
        namespace=namespace,
        current=services.snapshots.snapshot_id,
        snapshots=[snapshot_info(r) for r in listed],
    )


async def snapshot_dump(services: Services, args: SnapshotDumpInput, session: Session) -> SnapshotOutput:
    record = await services.snapshots.save("manual")
    if args.output:
        path = snapshot_files.confined(services.settings.snapshot_dir, args.output)
        snapshot_files.write_file(record, path, overwrite=args.overwrite)
    return SnapshotOutput(snapshot=snapshot_info(record), path=args.output)


async def snapshot_restore(services: Services, args: SnapshotRestoreInput, session: Session) -> SnapshotOutput:
    directory = services.settings.snapshot_dir
    path = None if args.input is None else str(snapshot_files.confined(directory, args.input))
    record = await services.snapshots.choose(args.snapshot_id, path, args.previous)
    adopted = await services.snapshots.adopt(record, "rollback" if args.previous else "restore")
    return SnapshotOutput(snapshot=snapshot_info(adopted), path=args.input)


# -- the registry -----------------------------------------------------------------------------------

TOOLS: list[OwnTool[Any, Any]] = [
    OwnTool(
        "recommend_tool",
        "Rank the tools for a task described in words, best first.",
        RecommendToolInput,
        RecommendToolOutput,
        recommend_tool,
        False,
        uses_store=False,
        waits=False,
    ),
    OwnTool(
        "recommend_next_tools",
        "The tools likely called next after the recent ones (a retry of a failed call included).",
        RecommendNextInput,
        RecommendNextOutput,
        recommend_next_tools,
        True,
        uses_store=False,
        waits=False,
        unlisted=("last_failed",),
    ),
    OwnTool(
        "submit_feedback",
        "Rate a tool call 1 (useless) to 5 (right): by execution_id (in its result's _meta), else the newest "
        "call of tool.",
        SubmitFeedbackInput,
        SubmitFeedbackOutput,
        submit_feedback,
        False,
    ),
    OwnTool(
        "end_session",
        "End the session with its outcome.",
        EndSessionInput,
        EndSessionOutput,
        end_session,
        False,
    ),
    OwnTool(
        "get_learning_stats",
        "Admin: what the learner knows, downstream health.",
        NoInput,
        LearningStatsOutput,
        get_learning_stats,
        True,
        admin=True,
        uses_store=False,
    ),
    OwnTool(
        "get_tool_metrics",
        "Admin: calls, success, latency, ratings per tool.",
        ToolMetricsInput,
        ToolMetricsOutput,
        get_tool_metrics,
        True,
        admin=True,
    ),
    OwnTool(
        "get_successful_sequences",
        "Admin: the most frequent successful tool sequences.",
        SequencesInput,
        SequencesOutput,
        get_successful_sequences,
        True,
        admin=True,
        uses_store=False,
    ),
]
SNAPSHOT_TOOLS: list[OwnTool[Any, Any]] = [
    OwnTool(
        "snapshot_list",
        "Admin: the stored snapshots of the learned state, newest first.",
        NoInput,
        SnapshotListOutput,
        snapshot_list,
        True,
        admin=True,
    ),
    OwnTool(
        "snapshot_dump",
        "Admin: take a snapshot of the learned state now (stored; optionally also written to a file).",
        SnapshotDumpInput,
        SnapshotOutput,
        snapshot_dump,
        False,
        admin=True,
    ),
    OwnTool(
        "snapshot_restore",
        "Admin: replace the learned state by a stored snapshot, a snapshot file, or the previous "
        "snapshot (rollback). A wrong checksum, bad signature or other major version is refused.",
        SnapshotRestoreInput,
        SnapshotOutput,
        snapshot_restore,
        False,
        admin=True,
    ),
]


def own_tools(*, admin: bool, snapshots: bool = False) -> dict[str, OwnTool[Any, Any]]:
    """Our tools by name: the admin ones only with `admin`, the snapshot ones only with `snapshots`."""
    tools = [*TOOLS, EVALUATE_TOOL] + (SNAPSHOT_TOOLS if snapshots else [])
    return {t.name: t for t in tools if admin or not t.admin}
