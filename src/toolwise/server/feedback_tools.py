"""submit_feedback and end_session: the agent's verdict on a call (a rating) and on a session (its outcome)."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field, field_validator

from toolwise.feedback.arguments import storable
from toolwise.learning.sessions import Session
from toolwise.server.own import SESSION_FIELD, Input, Output
from toolwise.server.rating import call_to_rate
from toolwise.server.recommend import known
from toolwise.server.services import Services

# -- submit_feedback --------------------------------------------------------------------------------


class SubmitFeedbackInput(Input):
    rating: int = Field(ge=1, le=5, strict=True)
    execution_id: str | None = None
    # else the newest call of `tool`: in session_id if given, else in this connection, else the newest
    # made in the last 10 minutes (not in another open session)
    tool: str | None = None
    comment: str | None = Field(default=None, max_length=4000)
    session_id: str | None = SESSION_FIELD

    @field_validator("execution_id")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        """An id cut mid-character (half a surrogate pair) is looked up as the database can take it: unknown."""
        return None if value is None else storable(value)


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


async def submit_feedback(services: Services, args: SubmitFeedbackInput, session: Session) -> SubmitFeedbackOutput:
    execution_id, tool = args.execution_id, args.tool
    if tool is not None:
        known(services, [tool])
        if execution_id is None:
            named = bool(args.session_id)  # "" names none, as for every tool (`Sessions.resolve`)
            execution_id, session = await call_to_rate(services, session, tool, named=named)
            tool = None  # the call found is one of it
    execution, reward = await services.agent.rate(session, args.rating, execution_id, tool, args.comment)
    return SubmitFeedbackOutput(execution_id=execution.id, tool=execution.tool, rating=args.rating, reward=reward)


async def end_session(services: Services, args: EndSessionInput, session: Session) -> EndSessionOutput:
    episode = await services.agent.end_session(session.id, args.outcome, shown=session.name)
    return EndSessionOutput.model_validate(replace(episode, session_id=session.name), from_attributes=True)
