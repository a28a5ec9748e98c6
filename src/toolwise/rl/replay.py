"""Prioritized experience replay (Schaul et al. 2016) over a sum tree: O(log n) sampling and updates."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray


class SumTree:
    """A complete binary tree over `capacity` leaves whose inner nodes hold the sum of their children.
    Nodes live in a Python list: every operation is a walk of scalar reads and writes, which a list
    does faster than a numpy array (whose every scalar read makes a new numpy object)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be ≥ 1, got {capacity}")
        self.capacity = capacity
        self._size = 1
        while self._size < capacity:
            self._size *= 2
        self.nodes = [0.0] * (2 * self._size)

    @property
    def total(self) -> float:
        return self.nodes[1]

    def leaf(self, index: int) -> float:
        return self.nodes[self._size + index]

    def set(self, index: int, value: float) -> None:
        if not 0 <= index < self.capacity or not value >= 0 or not math.isfinite(value):
            raise ValueError(f"need 0 ≤ index < {self.capacity} and a finite value ≥ 0, got {index}, {value}")
        nodes = self.nodes
        node = self._size + index
        nodes[node] = value
        node //= 2
        while node >= 1:  # re-summed rather than shifted by a delta: no drift over millions of updates
            nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
            node //= 2

    def find(self, mass: float) -> int:
        """The leaf whose cumulative-sum interval contains `mass` (0 ≤ mass < total)."""
        nodes, node = self.nodes, 1
        while node < self._size:
            left = 2 * node
            if mass < nodes[left]:
                node = left
            else:
                mass -= nodes[left]
                node = left + 1
        return min(node - self._size, self.capacity - 1)


@dataclass(slots=True)
class Transition:
    """One learning step in interned ids; `next_context` is -1 for a terminal transition."""

    context: int
    tool: int
    reward: float
    next_context: int


@dataclass(slots=True)
class Batch:
    slots: NDArray[np.int64]
    transitions: list[Transition]
    weights: NDArray[np.float64]  # importance-sampling weights, max-normalised to 1


class PrioritizedReplay:
    """P(i) ∝ p_i^α; IS weight w_i = (N·P(i))^-β / max w, β annealed linearly to 1 over `beta_steps`
    samples; new transitions get the current maximum priority so each is replayed at least once."""

    SCHEMA = 1

    def __init__(
        self,
        capacity: int = 10_000,
        alpha: float = 0.6,
        beta: float = 0.4,
        beta_steps: int = 100_000,
        epsilon: float = 1e-3,
    ) -> None:
        if not 0 <= alpha <= 1 or not 0 <= beta <= 1 or beta_steps < 1 or epsilon <= 0:
            raise ValueError(
                f"need 0 ≤ alpha ≤ 1, 0 ≤ beta ≤ 1, beta_steps ≥ 1, epsilon > 0; "
                f"got {alpha}, {beta}, {beta_steps}, {epsilon}"
            )
        self.alpha, self.beta0, self.beta_steps, self.epsilon = alpha, beta, beta_steps, epsilon
        self.tree = SumTree(capacity)
        self.items: list[Transition | None] = [None] * capacity
        self.cursor = 0
        self.size = 0
        self.sampled = 0
        self.max_priority = 1.0

    def __len__(self) -> int:
        return self.size

    @property
    def beta(self) -> float:
        return min(1.0, self.beta0 + (1.0 - self.beta0) * self.sampled / self.beta_steps)

    def add(self, transition: Transition) -> None:
        self.items[self.cursor] = transition
        self.tree.set(self.cursor, self.max_priority**self.alpha)
        self.cursor = (self.cursor + 1) % self.tree.capacity
        self.size = min(self.size + 1, self.tree.capacity)

    def sample(self, batch_size: int, rng: np.random.Generator) -> Batch:
        """Stratified sampling: one draw from each of `batch_size` equal slices of the total mass."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        total = self.tree.total
        edges = np.arange(batch_size) * (total / batch_size)
        masses = edges + rng.random(batch_size) * (total / batch_size)
        found = [self.tree.find(m) for m in masses.tolist()]
        slots = np.array(found, dtype=np.int64)
        probs = np.array([self.tree.leaf(s) for s in found]) / total
        weights = (self.size * probs) ** -self.beta
        self.sampled += batch_size
        transitions = [self.items[s] for s in found]
        return Batch(slots, [t for t in transitions if t is not None], weights / weights.max())

    def update_priorities(self, slots: NDArray[np.int64], td_errors: NDArray[np.float64]) -> None:
        priorities = np.abs(td_errors) + self.epsilon
        for slot, priority in zip(slots.tolist(), priorities.tolist(), strict=True):
            self.tree.set(slot, priority**self.alpha)
        self.max_priority = max(self.max_priority, float(priorities.max()))

    def state_dict(self) -> dict[str, Any]:
        filled = range(self.size)
        return {
            "schema": self.SCHEMA,
            "config": [self.alpha, self.beta0, self.beta_steps, self.epsilon, self.tree.capacity],
            "cursor": self.cursor,
            "size": self.size,
            "sampled": self.sampled,
            "max_priority": self.max_priority,
            "leaves": np.array([self.tree.leaf(i) for i in filled]),
            "items": np.array(
                [[t.context, t.tool, t.reward, t.next_context] for i in filled if (t := self.items[i]) is not None]
            ).reshape(-1, 4),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        if state["schema"] != self.SCHEMA:
            raise ValueError(f"replay state schema {state['schema']} is not {self.SCHEMA}")
        alpha, beta0, beta_steps, epsilon, capacity = state["config"]
        self.__init__(int(capacity), alpha, beta0, int(beta_steps), epsilon)  # type: ignore[misc]  # reset to the loaded size: __init__ sets every field
        self.cursor, self.size, self.sampled = int(state["cursor"]), int(state["size"]), int(state["sampled"])
        self.max_priority = float(state["max_priority"])
        for i, (leaf, row) in enumerate(zip(state["leaves"], state["items"], strict=True)):
            self.items[i] = Transition(int(row[0]), int(row[1]), float(row[2]), int(row[3]))
            self.tree.set(i, float(leaf))
