"""Dense per-(context, tool) tables shared by the tabular policies: contexts interned to row ids."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context
from toolwise.rl.ids import Interner


class Table:
    """`values[c, a]` (float32) and `counts[c, a]` (int32), grown by doubling; `visits[c]` = Σ_a counts."""

    def __init__(self, rows: int = 64, cols: int = 16) -> None:
        self.contexts = Interner()
        self.values = np.zeros((rows, cols), dtype=np.float32)
        self.counts = np.zeros((rows, cols), dtype=np.int32)
        self.visits = np.zeros(rows, dtype=np.int64)

    def row(self, context: Context) -> int:
        """Row of a context, interning it (and growing the arrays) on first sight."""
        row = self.contexts.intern(context.hash)
        if row >= self.values.shape[0]:
            self._grow(rows=2 * self.values.shape[0])
        return row

    def find(self, context: Context) -> int | None:
        return self.contexts.get(context.hash)

    def ensure_arms(self, arms: NDArray[np.int64]) -> None:
        if len(arms) and int(arms.max()) >= self.values.shape[1]:
            self._grow(cols=max(2 * self.values.shape[1], int(arms.max()) + 1))

    def _grow(self, rows: int | None = None, cols: int | None = None) -> None:
        r, c = self.values.shape
        rows, cols = rows or r, cols or c
        for name in ("values", "counts"):
            old = getattr(self, name)
            new = np.zeros((rows, cols), dtype=old.dtype)
            new[:r, :c] = old
            setattr(self, name, new)
        visits = np.zeros(rows, dtype=np.int64)
        visits[:r] = self.visits
        self.visits = visits

    def gather(self, context: Context, arms: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.int64], int]:
        """Values, counts and total visits of `arms` in `context` (zeros for an unseen context)."""
        self.ensure_arms(arms)
        row = self.find(context)
        if row is None:
            return np.zeros(len(arms)), np.zeros(len(arms), dtype=np.int64), 0
        return (
            self.values[row, arms].astype(np.float64),
            self.counts[row, arms].astype(np.int64),
            int(self.visits[row]),
        )

    def nbytes(self) -> int:
        return self.values.nbytes + self.counts.nbytes + self.visits.nbytes

    def state_dict(self) -> dict[str, Any]:
        n = len(self.contexts)
        return {
            "contexts": list(self.contexts.names),
            "values": self.values[:n].copy(),
            "counts": self.counts[:n].copy(),
            "visits": self.visits[:n].copy(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        values = np.asarray(state["values"], dtype=np.float32)
        n, cols = values.shape if values.ndim == 2 else (0, 16)
        self.__init__(max(64, 2 * n), max(cols, 16))  # type: ignore[misc]  # reset to the loaded size: __init__ sets every field
        for name in state["contexts"]:
            self.contexts.intern(name)
        self.values[:n, :cols] = values
        self.counts[:n, :cols] = np.asarray(state["counts"], dtype=np.int32).reshape(n, cols)
        self.visits[:n] = np.asarray(state["visits"], dtype=np.int64)
