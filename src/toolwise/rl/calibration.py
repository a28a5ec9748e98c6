"""A probability made a calibrated P(works) (Platt scaling, learned online): the outcome memory's prior mean
(rl/outcomes.py) from the choice model's p_agent, and the logit it reads it through."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray


def logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    q = np.clip(p, 1e-4, 1.0 - 1e-4)
    out: NDArray[np.float64] = np.log(q / (1.0 - q))
    return out


def logit_of(p: float) -> float:
    """`logit` of one probability, in scalar arithmetic (a call at a time)."""
    q = min(max(p, 1e-4), 1.0 - 1e-4)
    return math.log(q / (1.0 - q))


class Calibration:
    """A probability p made a calibrated P(works): σ(a + b·logit p), learned online (Platt scaling:
    logistic regression, AdaGrad) from each call's p before it was learned and whether it worked (a rating
    that says otherwise later revises it). Starts at the identity (a = 0, b = 1). It makes the choice
    model's p_agent the prior mean of a call with no evidence. With `cosine`, a third weight c on the
    query–tool cosine (σ(a + b·logit p + c·cosine), c starting at 0): the agent's calls work more often the
    better the tool's text matches the request, which p_agent alone misses where several right tools share
    it (the reported confidence's map: rl/policies/outcome.py)."""

    def __init__(self, rate: float, min_slope: float = 0.0, start: float = 0.0, *, cosine: bool = False) -> None:
        """`min_slope`: the least b may be. The choice model's p_agent is learned only on the tools the agent
        called, whose outcomes say little of the tools it did not (a tool it seldom calls may seem to work as
        often as its habit): at 1, p_agent says at least as much as it claims. `start`: outcomes the map's
        identity start counts as; until it has learned from many, it says 0.5, "not known", in proportion
        (the choice model's softmax says 0.9 before any call: its initial weights' scale, not data)."""
        self.rate, self.min_slope, self.start, self.cosine = rate, min_slope, start, cosine
        self.weights = np.array([0.0, 1.0, 0.0] if cosine else [0.0, 1.0])
        self.steps = np.zeros(len(self.weights))
        self.seen = 0

    def mean(self, p_agent: NDArray[np.float64], cosine: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
        """σ of the map at each p_agent (and, with `cosine`, each one's query–tool cosine)."""
        if self.start and not self.seen:  # nothing learned: (0·m + start·0.5)/start, whatever m is
            return np.full(np.shape(p_agent), 0.5)
        z = self.weights[0] + self.weights[1] * logit(p_agent)
        if self.cosine:
            if cosine is None:
                raise ValueError("this calibration reads the query–tool cosine: none was given")
            z = z + self.weights[2] * cosine
        m: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-z))
        if self.start:
            m = (self.seen * m + self.start * 0.5) / (self.seen + self.start)
        return m

    def learn(self, p_agent: float, worked: float, cosine: float = 0.0) -> None:
        """One AdaGrad step on the log-loss."""
        self.learn_many([p_agent], [worked], [cosine])

    def learn_many(self, p_agents: list[float], worked: list[float], cosines: list[float] | None = None) -> None:
        """`learn` of each call in order, in scalar arithmetic (no array work a call): the weights and step
        sums read once and written back once. `cosines`: each call's query–tool cosine (read with `cosine`)."""
        a, b, c = float(self.weights[0]), float(self.weights[1]), float(self.weights[2]) if self.cosine else 0.0
        s_a, s_b, s_c = float(self.steps[0]), float(self.steps[1]), float(self.steps[2]) if self.cosine else 0.0
        rate, min_slope = self.rate, self.min_slope
        if not self.cosine or cosines is None:
            if self.cosine:
                raise ValueError("this calibration reads the query–tool cosine: none was given")
            cosines = [0.0] * len(p_agents)  # c stays 0: its gradient is the error times 0
        for p, fit, r in zip(p_agents, worked, cosines, strict=True):
            z = logit_of(p)
            error = fit - 1.0 / (1.0 + math.exp(-(a + b * z + c * r)))
            g_a, g_b, g_c = error, error * z, error * r
            s_a, s_b, s_c = s_a + g_a * g_a, s_b + g_b * g_b, s_c + g_c * g_c
            a = a + rate * g_a / math.sqrt(1.0 + s_a)
            b = max(b + rate * g_b / math.sqrt(1.0 + s_b), min_slope)
            c = c + rate * g_c / math.sqrt(1.0 + s_c)
        self.seen += len(p_agents)
        self.steps[:] = [s_a, s_b, s_c][: len(self.steps)]
        self.weights[:] = [a, b, c][: len(self.weights)]

    def revise(self, p_agent: float, change: float, cosine: float = 0.0) -> None:
        """A call already learned turned out otherwise (a rating): its step again with the label's change
        (the log-loss gradient is linear in the label), its count and step sizes left as they were."""
        inputs = np.array([1.0, logit_of(p_agent), cosine][: len(self.weights)])
        self.weights += self.rate * change * inputs / np.sqrt(1.0 + self.steps)
        self.weights[1] = max(self.weights[1], self.min_slope)

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.copy(), "steps": self.steps.copy(), "seen": self.seen}

    def load_state(self, state: dict[str, Any]) -> None:
        weights = np.asarray(state["weights"], dtype=np.float64)
        if len(weights) != len(self.weights):
            raise ValueError(f"a calibration of {len(self.weights)} weights cannot load {len(weights)}")
        self.weights = weights.copy()
        self.steps = np.asarray(state["steps"], dtype=np.float64).copy()
        self.seen = int(state.get("seen", 0))

    def started_from(self, other: Calibration) -> None:
        """This map started where `other` (a map of p_agent alone) is, the cosine's weight at 0: for a state
        saved before this map was learned beside it."""
        self.weights[:2], self.steps[:2], self.seen = other.weights, other.steps, other.seen
