"""The calls the choice model remembers, to learn them again (its replay): a ring of the most recent,
each as the model saw it, in numpy arrays indexed by slot."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.policies.base import FEATURES
from toolwise.rl.policies.choice_step import Calls


class CallMemory:
    """A ring of the most recent learned calls, each as the choice model saw it: x(q), the softmax's
    candidates (padded with −1) and their feature rows, the called one's position, whether it worked
    and its weight. float32 throughout: about 1 KB a call."""

    def __init__(self, capacity: int, dim: int, width: int) -> None:
        self.x = np.zeros((capacity, dim), np.float32)
        self.arms = np.full((capacity, width), -1, np.int64)
        self.rows = np.zeros((capacity, width, len(FEATURES)), np.float32)
        self.at = np.zeros(capacity, np.int64)
        self.worked = np.zeros(capacity, bool)
        self.weight = np.zeros(capacity, np.float32)
        self.cursor = self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        x: NDArray[np.float64],
        arms: NDArray[np.int64],
        rows: NDArray[np.float64],
        at: int,
        worked: bool,
        weight: float,
    ) -> None:
        i, n = self.cursor, min(len(arms), self.arms.shape[1])
        if at >= n:  # the called one first: it must survive the cut to the ring's width
            order = np.concatenate(([at], np.delete(np.arange(len(arms)), at)))[:n]
            arms, rows, at = arms.take(order), rows.take(order, 0), 0
        self.x[i] = x
        self.arms[i] = -1
        self.arms[i, :n] = arms[:n]
        self.rows[i, :n] = rows[:n]
        self.at[i], self.worked[i], self.weight[i] = at, worked, weight
        self.cursor = (i + 1) % len(self.x)
        self.size = min(self.size + 1, len(self.x))

    def add_many(
        self,
        x: NDArray[np.floating[Any]],
        arms: NDArray[np.int64],
        rows: NDArray[np.floating[Any]],
        at: NDArray[np.int64],
        worked: NDArray[np.bool_],
        weight: NDArray[np.float64],
    ) -> None:
        """`add` of each call in order (`arms[r]` its candidates, as wide as the ring or narrower), the
        ring's slots written at once."""
        capacity, n = len(self.x), arms.shape[1]
        if n > self.arms.shape[1]:
            for r in range(max(0, len(x) - capacity), len(x)):
                self.add(x[r], arms[r], rows[r], int(at[r]), bool(worked[r]), float(weight[r]))
            return
        keep = slice(max(0, len(x) - capacity), len(x))  # a run longer than the ring leaves its last calls
        slots = (self.cursor + np.arange(keep.start, keep.stop) - keep.start) % capacity
        self.x[slots] = x[keep]
        self.arms[slots] = -1
        self.arms[slots, :n] = arms[keep]
        self.rows[slots, :n] = rows[keep]
        self.at[slots], self.worked[slots], self.weight[slots] = at[keep], worked[keep], weight[keep]
        self.cursor = (self.cursor + keep.stop - keep.start) % capacity
        self.size = min(self.size + keep.stop - keep.start, capacity)

    def get(self, slot: int) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], int, bool, float]:
        n = int(np.count_nonzero(self.arms[slot] >= 0))
        return (
            self.x[slot].astype(np.float64),
            self.arms[slot, :n],
            self.rows[slot, :n].astype(np.float64),
            int(self.at[slot]),
            bool(self.worked[slot]),
            float(self.weight[slot]),
        )

    def rows_of(self, slots: NDArray[np.int64]) -> Calls:
        """The remembered calls in `slots`, as `choice_step.minibatch_step` takes them (x and rows float32, as kept)."""
        return Calls(
            self.x.take(slots, 0),
            self.arms.take(slots, 0),
            self.rows.take(slots, 0),
            self.at[slots],
            self.worked[slots],
            self.weight[slots].astype(np.float64),
        )

    def state_dict(self) -> dict[str, Any]:
        filled = slice(0, self.size)
        return {
            "cursor": self.cursor,
            "x": self.x[filled].copy(),
            "arms": self.arms[filled].copy(),
            "rows": self.rows[filled].copy(),
            "at": self.at[filled].copy(),
            "worked": self.worked[filled].copy(),
            "weight": self.weight[filled].copy(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        size = len(state["at"])
        if size > len(self.x) or np.asarray(state["x"]).shape[1:] != self.x.shape[1:]:
            raise ValueError(f"remembered calls of shape {np.asarray(state['x']).shape} do not fit this memory")
        width = min(np.asarray(state["arms"]).shape[1], self.arms.shape[1])
        self.arms[:] = -1
        for name in ("x", "at", "worked", "weight"):
            getattr(self, name)[:size] = state[name]
        self.arms[:size, :width] = np.asarray(state["arms"])[:, :width]
        self.rows[:size, :width] = np.asarray(state["rows"])[:, :width]
        self.cursor, self.size = int(state["cursor"]), size

    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.x, self.arms, self.rows, self.at, self.worked, self.weight))
