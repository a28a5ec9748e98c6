"""toolwise's own MCP tools. Inputs and outputs are pydantic models: the JSON schemas clients see are
generated from them, inputs are validated by them, and each output renders a short text too."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from toolwise.feedback import FeedbackService, ToolMetrics
from toolwise.rl import UnknownToolError
from toolwise.server.catalogue import Catalogue, Health
from toolwise.server.learning import LearningService
from toolwise.server.sessions import Session

SESSION_FIELD = Field(
    default=None,
    description="Session to act in; defaults to this client connection (stdio process or HTTP session).",
)


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Output(BaseModel):
    def text(self) -> str:
        return self.model_dump_json(indent=1)


# -- recommend_tool ---------------------------------------------------------------------------------


class RecommendToolInput(Input):
    query: str = Field(min_length=1, description="What the agent wants to do, in its own words.")
    top_k: int = Field(default=5, ge=1, le=50)
    candidates: list[str] | None = Field(default=None, description="Limit the choice to these tool names.")
    session_id: str | None = SESSION_FIELD


class Recommendation(BaseModel):
    tool: str
    score: float = Field(description="The policy's ranking score (expected reward plus exploration).")
    confidence: float = Field(description="Expected normalised reward in 0..1 from what was learned.")
    relevance: float = Field(description="Lexical/sequence relevance to the query in 0..1 (the prior).")
    reason: str
    explored: bool


class RecommendToolOutput(Output):
    decision_id: str
    context_hash: str
    policy: str
    explored: bool
    propensity: float
    session_id: str
    recommendations: list[Recommendation]

    def text(self) -> str:
        lines = [f"{i}. {r.tool} — {r.reason}" for i, r in enumerate(self.recommendations, 1)]
        return "\n".join([f"Recommended ({self.policy}, decision {self.decision_id}):", *lines])


# -- recommend_next_tools ---------------------------------------------------------------------------


class RecommendNextInput(Input):
    recent_tools: list[str] | None = Field(default=None, description="Defaults to the session's own calls.")
    top_k: int = Field(default=5, ge=1, le=50)
    session_id: str | None = SESSION_FIELD


class NextRecommendation(BaseModel):
    tool: str
    score: float
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
            return f"No tool has followed {' → '.join(self.recent_tools) or 'nothing'} at least twice yet."
        return "\n".join(f"{r.tool}: {r.reason}" for r in self.recommendations)


# -- submit_feedback --------------------------------------------------------------------------------


class SubmitFeedbackInput(Input):
    rating: int = Field(ge=1, le=5, strict=True, description="1 (useless) to 5 (exactly right).")
    execution_id: str | None = Field(default=None, description="From the call's _meta['toolwise/execution_id'].")
    tool: str | None = Field(default=None, description="Rate the session's latest call of this tool instead.")
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
    namespace: str
    tools: int
    decisions: int
    calls: int
    updates: int
    mean_reward: float | None
    exploration_rate: float | None = Field(description="Share of recommendations that explored.")
    replay_size: int
    sequences: int
    open_sessions: int
    queued_records: int
    committed_records: int
    failed_batches: int
    dead_lettered: int
    downstreams: list[Health]

    def text(self) -> str:
        health = ", ".join(f"{d.server}: {d.state}" for d in self.downstreams)
        mean = "n/a" if self.mean_reward is None else f"{self.mean_reward:.2f}"
        return (
            f"policy {self.policy}, {self.tools} tools, {self.decisions} decisions, {self.calls} calls, "
            f"mean reward {mean}; downstreams: {health}"
        )


class ToolMetricsInput(Input):
    tool: str | None = None


class ToolMetricsOutput(Output):
    metrics: list[ToolMetrics]

    def text(self) -> str:
        if not self.metrics:
            return "No executions recorded yet."
        return "\n".join(
            f"{m.tool}: {m.calls} calls, {m.success_rate:.0%} success, p95 {m.p95_latency_ms:.0f} ms"
            + (f", rated {m.avg_rating:.1f}" if m.avg_rating is not None else "")
            for m in self.metrics
        )


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


# -- the registry -----------------------------------------------------------------------------------

Handler = Callable[[BaseModel, Session | None], Awaitable[Output]]


@dataclass(frozen=True, slots=True)
class OwnTool:
    name: str
    description: str
    input: type[Input]
    output: type[Output]
    handler: Handler
    read_only: bool
    admin: bool = False

    @property
    def takes_session(self) -> bool:
        return "session_id" in self.input.model_fields

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input.model_json_schema(),
            output_schema=self.output.model_json_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=False,
                idempotent_hint=self.read_only,
                open_world_hint=False,
            ),
        )


def own_tools(
    learning: LearningService, feedback: FeedbackService, catalogue: Catalogue, *, admin: bool
) -> dict[str, OwnTool]:
    """Our tools by name, their handlers closing over the running services."""
    learner = learning.learner

    def known(names: list[str]) -> None:
        unknown = [n for n in names if n not in learner.tools]
        if unknown:
            raise UnknownToolError(unknown)

    async def recommend_tool(args: RecommendToolInput, session: Session) -> RecommendToolOutput:
        d = learning.recommend(session, args.query, args.top_k, args.candidates)
        recs = [
            Recommendation(
                tool=r.tool,
                score=r.score,
                confidence=min(1.0, max(0.0, r.expected)),
                relevance=r.prior,
                reason=f"relevance {r.prior:.2f}, expected reward {r.expected:.2f}"
                + (" (exploring)" if d.explored and r.tool == d.chosen else ""),
                explored=d.explored and r.tool == d.chosen,
            )
            for r in d.ranked
        ]
        return RecommendToolOutput(
            decision_id=d.decision_id,
            context_hash=d.context_hash,
            policy=d.policy,
            explored=d.explored,
            propensity=d.propensity,
            session_id=session.id,
            recommendations=recs,
        )

    async def recommend_next_tools(args: RecommendNextInput, session: Session) -> RecommendNextOutput:
        recent = session.tools if args.recent_tools is None else args.recent_tools
        known(recent)
        found = learner.recommend_next(recent, learner.active_names, args.top_k)
        return RecommendNextOutput(
            session_id=session.id,
            recent_tools=recent,
            recommendations=[
                NextRecommendation(
                    tool=n.tool,
                    score=n.score,
                    count=n.count,
                    success_rate=n.success_rate,
                    mean_reward=n.mean_reward,
                    reason=n.reason,
                )
                for n in found
            ],
        )

    async def submit_feedback(args: SubmitFeedbackInput, session: Session) -> SubmitFeedbackOutput:
        if args.tool is not None:
            known([args.tool])
        execution, reward = await learning.rate(session, args.rating, args.execution_id, args.tool, args.comment)
        return SubmitFeedbackOutput(execution_id=execution.id, tool=execution.tool, rating=args.rating, reward=reward)

    async def end_session(args: EndSessionInput, session: Session) -> EndSessionOutput:
        episode = await learning.end_session(session.id, args.outcome)
        return EndSessionOutput(
            session_id=episode.session_id,
            outcome=episode.outcome,
            tools=episode.tools,
            total_reward=episode.total_reward,
        )

    async def get_learning_stats(args: NoInput, session: Session | None) -> LearningStatsOutput:
        w = feedback.stats
        return LearningStatsOutput(
            policy=learner.policy.name,
            namespace=learning.namespace,
            tools=len(learner.active),
            decisions=learning.decisions,
            calls=learning.calls,
            updates=learner.updates,
            mean_reward=learner.reward_sum / learner.updates if learner.updates else None,
            exploration_rate=learning.explored / learning.decisions if learning.decisions else None,
            replay_size=len(learner.replay),
            sequences=sum(len(v) for v in learner.sequences.table.values()),
            open_sessions=len(learning.sessions),
            queued_records=w.queue_depth,
            committed_records=w.committed,
            failed_batches=w.failed_batches,
            dead_lettered=w.dead_lettered,
            downstreams=catalogue.health(),
        )

    async def get_tool_metrics(args: ToolMetricsInput, session: Session | None) -> ToolMetricsOutput:
        return ToolMetricsOutput(metrics=await feedback.get_tool_metrics(args.tool, namespace=learning.namespace))

    async def get_successful_sequences(args: SequencesInput, session: Session | None) -> SequencesOutput:
        rows = learner.sequences.top_sequences(args.tool, args.limit)
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

    tools = [
        OwnTool(
            "recommend_tool",
            "Rank the available tools for a task described in words; learns from every call and rating that follows.",
            RecommendToolInput,
            RecommendToolOutput,
            recommend_tool,
            False,
        ),
        OwnTool(
            "recommend_next_tools",
            "Suggest the tools that usually come next after the recent ones, from learned tool sequences.",
            RecommendNextInput,
            RecommendNextOutput,
            recommend_next_tools,
            True,
        ),
        OwnTool(
            "submit_feedback",
            "Rate a tool execution 1..5 (by execution id, or the session's latest call of "
            "a tool); the rating changes its reward and what is learned.",
            SubmitFeedbackInput,
            SubmitFeedbackOutput,
            submit_feedback,
            False,
        ),
        OwnTool(
            "end_session",
            "Close the session's episode with its outcome (success, partial, failure).",
            EndSessionInput,
            EndSessionOutput,
            end_session,
            False,
        ),
        OwnTool(
            "get_learning_stats",
            "Admin: what the learner knows, the policy serving, downstream health.",
            NoInput,
            LearningStatsOutput,
            get_learning_stats,
            True,
            admin=True,
        ),
        OwnTool(
            "get_tool_metrics",
            "Admin: calls, success rate, latency (mean, p95) and ratings per tool.",
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
        ),
    ]
    return {t.name: t for t in tools if admin or not t.admin}
