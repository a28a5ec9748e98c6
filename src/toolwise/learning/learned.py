"""What a running toolwise has learned, owned in one place.

`LearnedState` is the learner with everything that must change together with it: the random stream
its decisions draw from, what of the shared log it includes (`Covered`) and its counters. Restoring a
snapshot replaces it whole (`LearningService.adopt`), so no reader ever sees a learner of one snapshot
with the watermark of another; the counters are this instance's (an instance's row in `inspect status`),
never a snapshot's, which another instance or namespace may have saved: they carry over. `CatchUp` is
where a server is in learning the log after start-up (what `serving` reports). Only this module assigns
their fields; the services call their methods.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

from toolwise.learning.watermark import Covered
from toolwise.rl import Learner


@dataclass
class LearnedState:
    learner: Learner
    rng: np.random.Generator
    covered: Covered = field(default_factory=Covered)  # what of the shared log it includes (sharing.py)
    decisions: int = 0  # recommendations this instance served
    calls: int = 0  # this instance's own proxied calls learned (and recorded)
    explored: int = 0
    unsnapshotted: int = 0  # executions learned since the newest snapshot (snapshots by row count)

    def decided(self, explored: bool) -> None:
        self.decisions += 1
        self.explored += explored

    def called(self) -> None:
        self.calls += 1

    def learned(self, executions: int = 1) -> None:
        self.unsnapshotted += executions

    def snapshotted(self, executions: int) -> None:
        """A snapshot holding that many of the executions learned since the previous one was stored."""
        self.unsnapshotted -= executions

    def carry_over(self, replaced: LearnedState) -> None:
        """Take over from the state this one replaces what is not in a snapshot: the executions learned
        since the newest one, and this instance's counters."""
        self.unsnapshotted += replaced.unsnapshotted
        self.decisions += replaced.decisions
        self.calls += replaced.calls
        self.explored += replaced.explored

    def cover(self, covered: Covered) -> None:
        """Count the state as including `covered` of the log (a restore takes the log "as of now")."""
        self.covered = covered


class CatchUp:
    """Whether the learned state lags the log (loading a snapshot, replaying the log after it), and how
    far the replay is: meanwhile recommendations come from the prior (under a seed they wait: `until_caught_up`)."""

    def __init__(self) -> None:
        self.done = 0
        self.total = 0
        self._loaded = asyncio.Event()  # cleared while a server loads its learned state
        self._loaded.set()
        self._caught_up = asyncio.Event()  # cleared while the state lags the log
        self._caught_up.set()

    @property
    def active(self) -> bool:
        return not self._caught_up.is_set()

    def begin(self) -> None:
        self._caught_up.clear()

    def begin_loading(self) -> None:
        self._caught_up.clear()
        self._loaded.clear()

    def end_loading(self) -> None:
        self._loaded.set()

    @property
    def loading(self) -> bool:
        return not self._loaded.is_set()

    async def until_loaded(self) -> None:
        await self._loaded.wait()

    async def until_caught_up(self) -> None:
        await self._caught_up.wait()

    def begin_replay(self) -> None:
        self._caught_up.clear()
        self.done = self.total = 0

    def to_replay(self, total: int) -> None:
        self.total = total

    def replayed(self, entries: int) -> None:
        self.done += entries

    def finish(self) -> None:
        self._caught_up.set()
