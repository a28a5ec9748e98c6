"""Which log entries (execution seqs, rating ids, episode ends) have been learned, so each is learned
exactly once.

Ids are handed out in order but may commit out of order (two instances writing to PostgreSQL), and
a rolled-back write leaves a hole for ever. So: everything up to `floor` is learned, `seen` holds the
learned ids above it, and the floor only moves over a hole once the hole is older than a grace
period (by then a late commit would have shown up). Rating ids are one sequence for every namespace: the
other namespaces' ratings a sync reads are passed over as they are read, not taken for holes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Watermark:
    floor: int = 0
    seen: set[int] = field(default_factory=set)
    # a hole's first id → when it was first found, and the highest id known then (every id below it was handed
    # out before that time)
    _hole_since: dict[int, tuple[float, int]] = field(default_factory=dict)

    def fresh(self, n: int) -> bool:
        return n > self.floor and n not in self.seen

    def add(self, n: int) -> None:
        if n > self.floor:
            self.seen.add(n)

    def advance(self, now: float, grace_s: float, others: Sequence[int] = ()) -> None:
        """Move the floor over what was learned, and over `others` (ascending ids read in the log that are no
        entries of this one: another namespace's ratings, which share its ids), not kept once passed; then over
        a hole once it is older than the grace period, with every hole below the highest id known when it was
        found (all handed out before then)."""
        others = [n for n in others if n > self.floor]
        top = max(max(self.seen, default=0), others[-1] if others else 0)
        passed = 0
        while top > self.floor:
            following = self.floor + 1
            while passed < len(others) and others[passed] < following:
                passed += 1
            if following in self.seen or (passed < len(others) and others[passed] == following):
                self.seen.discard(following)
                self._hole_since.pop(following, None)  # a hole that a late commit filled
                self.floor = following
                continue
            since, upto = self._hole_since.setdefault(following, (now, top))
            if now - since < grace_s:
                return
            del self._hole_since[following]
            self.floor = upto  # the holes are rolled-back writes: step over all of them
            self.seen = {n for n in self.seen if n > upto}

    def state(self) -> dict[str, Any]:
        return {"floor": self.floor, "seen": sorted(self.seen)}

    @classmethod
    def of(cls, state: dict[str, Any]) -> Watermark:
        return cls(int(state["floor"]), {int(n) for n in state["seen"]})


@dataclass(slots=True)
class Covered:
    """What of the shared log a learned state includes: executions, ratings and episode ends by
    watermark, and this instance's own executions and episode ends learned live that no sync has seen
    in the log yet (by id; a snapshot keeps them all, so a restart learns each entry exactly once).
    `episodes` is None for a state saved before episode ends were shared: its next sync starts at the
    log's newest end (what the state learned of earlier ones is unknown; none is learned twice)."""

    executions: Watermark = field(default_factory=Watermark)
    ratings: Watermark = field(default_factory=Watermark)
    live: set[str] = field(default_factory=set)
    episodes: Watermark | None = field(default_factory=Watermark)

    def episode_mark(self, head: int) -> Watermark:
        """The episode ends' watermark; a state from before ends were shared starts at `head`, the
        log's newest end (what it learned of earlier ones is unknown; none is learned twice)."""
        if self.episodes is None:
            self.episodes = Watermark(head)
        return self.episodes

    def state(self) -> dict[str, Any]:
        state = {"executions": self.executions.state(), "ratings": self.ratings.state(), "live": sorted(self.live)}
        return state if self.episodes is None else {**state, "episodes": self.episodes.state()}

    @classmethod
    def of(cls, state: dict[str, Any]) -> Covered:
        episodes = Watermark.of(state["episodes"]) if "episodes" in state else None
        return cls(
            Watermark.of(state["executions"]), Watermark.of(state["ratings"]), set(state.get("live", ())), episodes
        )
