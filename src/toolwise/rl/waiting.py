"""The failures waiting for their session's next call (rl/hindsight.py reads a failure from what came
next): the newest of each session, with its reward and when it was noted, until that call comes, the
session ends, or it has waited too long."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from typing import Any

from toolwise.rl.steps import Step

WAITING = 4096  # sessions whose last call failed and waits for the next one (the oldest is read as ended)
WAIT_CALLS = 256  # calls learned after which a failure still waiting is read as its session's end


class Waiting:
    """Session → its failed last call, the call's reward and the learner's update count when it was noted,
    oldest first. Iterates over the sessions."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[Step, float, int]] = OrderedDict()

    def hold(self, step: Step, reward: float, at: int) -> None:
        """`step` (a failure of `step.session`) waits, noted at update `at`; it replaces the session's
        earlier one and becomes the newest."""
        assert step.session is not None
        self._held[step.session] = (step, reward, at)
        self._held.move_to_end(step.session)

    def pop(self, session: str) -> tuple[Step, float] | None:
        """The session's waiting failure and its reward, no longer waiting (None: none waits)."""
        found = self._held.pop(session, None)
        return None if found is None else (found[0], found[1])

    def overdue(self, updates: int) -> str | None:
        """The oldest session whose failure has waited past `WAITING` sessions or `WAIT_CALLS` calls (the
        learner at `updates`), to be read as ended: a session may never end (an agent framework's, a
        connection that is never closed). None: none has."""
        if not self._held:
            return None
        session, (_, _, at) = next(iter(self._held.items()))
        if len(self._held) <= WAITING and updates - at <= WAIT_CALLS:
            return None
        return session

    def state(self) -> list[tuple[dict[str, Any], float, int]]:
        return [(asdict(step), reward, at) for step, reward, at in self._held.values()]

    def load(self, state: Iterable[tuple[dict[str, Any], float, int]]) -> None:
        self._held = OrderedDict()
        for fields, reward, at in state:
            step = Step(**fields)
            self._held[str(step.session)] = (step, float(reward), int(at))

    def __len__(self) -> int:
        return len(self._held)

    def __iter__(self) -> Iterator[str]:
        return iter(self._held)

    def __contains__(self, session: object) -> bool:
        return session in self._held
