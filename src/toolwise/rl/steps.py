"""A step, one observed call in the context it was made, as the learner reads it: one record (`Step`)
or a run as columns (`StepColumns`, what a replay of the log builds without an object a step)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

# Why a call failed, as learning reads it (rl/hindsight.py); None or FIT: it may be the tool's fit
FIT = "fit"  # the tool answered with an error, or broke its output schema
HEALTH = "health"  # the server did not answer in time, the connection was lost, its circuit is open
ARGUMENTS = "arguments"  # the server refused the call's arguments


@dataclass(slots=True)
class Step:
    """One observed execution, in the context it was made."""

    tool: str
    success: bool
    latency_ms: float  # as every record of a call has it (the reward converts to seconds)
    query: str | None = None
    previous_tool: str | None = None
    position: int = 0
    history: Sequence[str] = ()
    rating: int | None = None
    terminal: bool = False
    passed_over: str | None = None  # the tool toolwise recommended for this call, when the agent called another
    session: str | None = None  # the conversation it belongs to (a failure is read from its next call)
    fault: str | None = None  # why it failed (FIT, HEALTH, ARGUMENTS); None for a success
    after_failure: bool = False  # the session's call before it failed (the sequence model's marked prefixes)
    followed: bool = False  # the call is of the tool toolwise recommended just before it (else see passed_over)


def worked(success: bool, rating: int | None) -> bool:
    """Success as sequences count it: the call succeeded and the user did not rate it 1 or 2."""
    return success and (rating is None or rating >= 3)


@dataclass(frozen=True, slots=True)
class StepColumns:
    """A run of steps as columns (row i of each is step i), what a batch reads of each `Step`: a
    replay builds these from the log's columns without an object a step."""

    tool: Sequence[str]
    success: Sequence[bool]
    latency_ms: Sequence[float]
    query: Sequence[str | None]
    previous_tool: Sequence[str | None]
    history: Sequence[Sequence[str]]
    position: Sequence[int]
    rating: Sequence[int | None] | None = None  # None: no step is rated
    session: Sequence[str | None] | None = None  # None: no step's session is known (no hindsight)
    fault: Sequence[str | None] | None = None
    after_failure: Sequence[bool] | None = None  # None: no step follows a failure

    @classmethod
    def of(cls, steps: Sequence[Step]) -> StepColumns:
        return cls(
            [s.tool for s in steps],
            [s.success for s in steps],
            [s.latency_ms for s in steps],
            [s.query for s in steps],
            [s.previous_tool for s in steps],
            [s.history for s in steps],
            [s.position for s in steps],
            [s.rating for s in steps],
            [s.session for s in steps],
            [s.fault for s in steps],
            [s.after_failure for s in steps],
        )

    def step(self, i: int) -> Step:
        """Row `i` as a `Step`: the one place columns become one."""
        return Step(
            self.tool[i],
            self.success[i],
            self.latency_ms[i],
            query=self.query[i],
            previous_tool=self.previous_tool[i],
            position=self.position[i],
            history=self.history[i],
            rating=None if self.rating is None else self.rating[i],
            session=None if self.session is None else self.session[i],
            fault=None if self.fault is None else self.fault[i],
            after_failure=False if self.after_failure is None else self.after_failure[i],
        )

    def steps(self) -> list[Step]:
        return [self.step(i) for i in range(len(self))]

    def __len__(self) -> int:
        return len(self.tool)
