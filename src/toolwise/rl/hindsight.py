"""What a call says of its tool's fit to the request, read in hindsight from what the agent did next.

Real agents call the same tool again after most failures (wrong arguments, a transient error): that
failure says "right tool, bad call", not "not this tool here". A switch to another tool says the first
did not fit. So a failed call is read once its session's next call is known (or the session ended):

| the call                                   | the choice model learns | the outcome memory learns |
| ------------------------------------------ | ----------------------- | ------------------------- |
| worked (success, not rated 1–2)            | a choice                | fit 1                     |
| succeeded, rated 1–2                       | evidence against it     | fit 0                     |
| failed, the same tool called next          | a choice (it was wanted)| nothing (arguments)       |
| failed, another tool next / session ended  | evidence against it     | fit 0                     |
| refused its arguments                      | a choice                | nothing (arguments)       |
| timed out, transport lost, circuit open    | a choice                | nothing (the server's health)|
| any of the three above, rated 1–2          | evidence against it     | nothing                   |

A server's health (timeouts, lost connections) is its circuit's and shields' business, not the fit's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.steps import ARGUMENTS, HEALTH, Step, worked


def waits(step: Step) -> bool:
    """Whether the step's reading waits for its session's next call: a failure that may be the tool's
    fit, in a session that has a next call to wait for."""
    return not step.success and step.fault not in (HEALTH, ARGUMENTS) and step.session is not None


def reading(step: Step, next_tool: str | None) -> tuple[bool, float | None]:
    """(whether the choice model learns the call as the agent's choice, its fit or None), given the tool
    its session called next (None: none, the session ended)."""
    if step.success:
        ok = worked(True, step.rating)
        return ok, float(ok)
    if step.fault in (HEALTH, ARGUMENTS) or (next_tool is not None and next_tool == step.tool):
        return step.rating is None or step.rating >= 3, None  # a user's 1–2 says it was not wanted
    return False, 0.0


def readings(
    tools: Sequence[str],
    success: Sequence[bool],
    ratings: Sequence[int | None],
    sessions: Sequence[str | None],
    faults: Sequence[str | None],
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.bool_]]:
    """`reading` of every step of a run in order, each failure read from the next step of its session in
    the run: the choice model's `worked` and the fit (NaN: none) as columns, and which failures have no
    next step in the run (they wait, as live: `Learner.hold`)."""
    n = len(tools)
    chosen = np.zeros(n, dtype=bool)
    fit = np.full(n, np.nan)
    pending = np.zeros(n, dtype=bool)
    after: dict[str, str] = {}  # session → the tool of its next step, walking the run backwards
    for i in range(n - 1, -1, -1):
        step = Step(tools[i], success[i], 0.0, rating=ratings[i], session=sessions[i], fault=faults[i])
        session = sessions[i]
        next_tool = None if session is None else after.get(session)
        pending[i] = waits(step) and next_tool is None
        ok, value = reading(step, next_tool)
        chosen[i] = ok
        if value is not None:
            fit[i] = value
        if session is not None:
            after[session] = tools[i]
    return chosen, fit, pending
