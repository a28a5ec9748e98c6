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
    model's p_agent the prior mean of a call with no evidence."""

    def __init__(self, rate: float, min_slope: float = 0.0, start: float = 0.0) -> None:
        """`min_slope`: the least b may be. The choice model's p_agent is learned only on the tools the agent
        called, whose outcomes say little of the tools it did not (a tool it seldom calls may seem to work as
        often as its habit): at 1, p_agent says at least as much as it claims. `start`: outcomes the map's
        identity start counts as; until it has learned from many, it says 0.5, "not known", in proportion
        (the choice model's softmax says 0.9 before any call: its initial weights' scale, not data)."""
        self.rate, self.min_slope, self.start = rate, min_slope, start
        self.weights = np.array([0.0, 1.0])
        self.steps = np.zeros(2)
        self.seen = 0

    def mean(self, p_agent: NDArray[np.float64]) -> NDArray[np.float64]:
        if self.start and not self.seen:  # nothing learned: (0·m + start·0.5)/start, whatever m is
            return np.full(np.shape(p_agent), 0.5)
        z = self.weights[0] + self.weights[1] * logit(p_agent)
        m: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-z))
        if self.start:
            m = (self.seen * m + self.start * 0.5) / (self.seen + self.start)
        return m

    def learn(self, p_agent: float, worked: float) -> None:
        """One AdaGrad step on the log-loss."""
        self.learn_many([p_agent], [worked])

    def learn_many(self, p_agents: list[float], worked: list[float]) -> None:
        """`learn` of each call in order, in scalar arithmetic (no array work a call): the weights and step
        sums read once and written back once."""
        a, b = float(self.weights[0]), float(self.weights[1])
        s_a, s_b = float(self.steps[0]), float(self.steps[1])
        rate, min_slope = self.rate, self.min_slope
        for p, fit in zip(p_agents, worked, strict=True):
            z = logit_of(p)
            error = fit - 1.0 / (1.0 + math.exp(-(a + b * z)))
            g_a, g_b = error, error * z
            s_a, s_b = s_a + g_a * g_a, s_b + g_b * g_b
            a = a + rate * g_a / math.sqrt(1.0 + s_a)
            b = max(b + rate * g_b / math.sqrt(1.0 + s_b), min_slope)
        self.seen += len(p_agents)
        self.steps[0], self.steps[1] = s_a, s_b
        self.weights[0], self.weights[1] = a, b

    def revise(self, p_agent: float, change: float) -> None:
        """A call already learned turned out otherwise (a rating): its step again with the label's change
        (the log-loss gradient is linear in the label), its count and step sizes left as they were."""
        z = float(logit(np.array([p_agent]))[0])
        self.weights += self.rate * change * np.array([1.0, z]) / np.sqrt(1.0 + self.steps)
        self.weights[1] = max(self.weights[1], self.min_slope)

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.copy(), "steps": self.steps.copy(), "seen": self.seen}

    def load_state(self, state: dict[str, Any]) -> None:
        self.weights = np.asarray(state["weights"], dtype=np.float64).copy()
        self.steps = np.asarray(state["steps"], dtype=np.float64).copy()
        self.seen = int(state.get("seen", 0))
