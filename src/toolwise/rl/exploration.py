"""Exploration that follows the rewards, and a drift guard per tool.

Adaptive ε: it rises when recent calls work less often than they used to and falls back when they
are steady: ε = ε_min + (ε_max − ε_min)·min(1, drop / full_drop), with drop the long-run share of
calls that worked (an exponential average over ~`long` calls) minus the recent one (~`short` calls).
Whether a call worked, not its whole reward: the latency part moves with the network, not with what
toolwise recommends. Steady success keeps ε at ε_min; a fall of `full_drop` (0.25) explores at ε_max.

Drift guard: a two-sided Page-Hinkley test on whether each tool's calls work (1 or 0) (Page 1954; Hinkley
1971; as in river's `PageHinkley`). It fires when a tool's rewards move by more than `delta` for
long enough that their cumulative deviation passes `threshold`; the tool is then re-opened: the
policy forgets what it learned of it and it joins the tools exploration picks from for
`reopen_calls` decisions. False alarms on a stationary tool: see tests/rl/test_exploration.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.ids import Interner
from toolwise.rl.policies.base import Selection

EPSILON_MAX = 0.2  # the most exploration a fall of the success rate brings
REOPENED_EPSILON = 0.1  # the least exploration while the drift guard holds a tool re-opened
EXPLORE_POOL = 5  # an exploring pick is uniform over at least the policy's best this many (and re-opened tools)
BROKEN_EPSILON, BROKEN_POOL = 0.5, 20  # … and when the pick is a tool whose rewards fell lately


@dataclass(frozen=True, slots=True)
class ExplorationConfig:
    adaptive: bool = True
    epsilon_min: float = 0.0
    epsilon_max: float = EPSILON_MAX
    short: int = 100  # calls the recent mean reward spans (about)
    long: int = 2000  # calls the long-run mean spans (about)
    full_drop: float = 0.25  # a fall of this much (share of calls that worked) explores at epsilon_max
    drift: bool = True
    delta: float = 0.15  # Page-Hinkley's tolerated change of a tool's success rate
    threshold: float = 8.0  # its alarm level (cumulative deviation): no false alarm in 100,000 stationary calls
    min_calls: int = 20  # a tool's calls before its detector may fire
    reopen_calls: int = 200  # decisions a drifted tool stays among the exploration candidates

    def __post_init__(self) -> None:
        if not 0 <= self.epsilon_min <= self.epsilon_max <= 1:
            raise ValueError(f"need 0 ≤ epsilon_min ≤ epsilon_max ≤ 1, got {self.epsilon_min}, {self.epsilon_max}")
        if self.short < 1 or self.long <= self.short or self.full_drop <= 0:
            raise ValueError(
                f"need 1 ≤ short < long and full_drop > 0, got {self.short}, {self.long}, {self.full_drop}"
            )
        if self.delta < 0 or self.threshold <= 0 or self.min_calls < 1 or self.reopen_calls < 0:
            raise ValueError("need delta ≥ 0, threshold > 0, min_calls ≥ 1, reopen_calls ≥ 0")


@dataclass(slots=True)
class PageHinkley:
    """Two-sided Page-Hinkley over one stream: fires on a rise or a fall of its mean."""

    count: int = 0
    mean: float = 0.0
    up: float = 0.0  # cumulative deviation above the running mean (minus delta), and its minimum
    up_min: float = 0.0
    down: float = 0.0
    down_max: float = 0.0

    def update(self, value: float, delta: float, threshold: float, min_calls: int) -> str | None:
        """Add `value`; "rose" or "fell" when the test fires (the detector then starts afresh)."""
        self.count += 1
        self.mean += (value - self.mean) / self.count
        self.up += value - self.mean - delta
        self.up_min = min(self.up_min, self.up)
        self.down += value - self.mean + delta
        self.down_max = max(self.down_max, self.down)
        if self.count < min_calls:
            return None
        if self.up - self.up_min > threshold:
            return "rose"
        if self.down_max - self.down > threshold:
            return "fell"
        return None


@dataclass(slots=True)
class Drift:
    tool: str
    at_call: int  # the learner's update count when it fired
    direction: str  # "rose" or "fell"
    before: float  # the share of the tool's calls that worked up to the change (as the detector saw it)
    after: float  # the same of its recent calls (about the last ten)


@dataclass(slots=True)
class Exploration:
    """The adaptive ε and the drift guard; pure state, the learner feeds it every learned call."""

    config: ExplorationConfig = field(default_factory=ExplorationConfig)
    recent: float | None = None
    long_run: float | None = None
    calls: int = 0
    detectors: dict[str, PageHinkley] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)  # each tool's recent mean (exponential, ~10 calls)
    reopened: dict[str, int] = field(default_factory=dict)  # tool → the decision count it stays open until
    drifts: list[Drift] = field(default_factory=list)  # newest last, the last 20 kept
    decisions: int = 0

    @property
    def epsilon(self) -> float:
        c = self.config
        if not c.adaptive or self.recent is None or self.long_run is None:
            return c.epsilon_min
        drop = max(0.0, self.long_run - self.recent)
        return c.epsilon_min + (c.epsilon_max - c.epsilon_min) * min(1.0, drop / c.full_drop)

    @property
    def reason(self) -> str:
        """Why ε is what it is, in words an admin reads."""
        if not self.config.adaptive:
            return f"fixed at {self.config.epsilon_min:.2f} (adaptive exploration off)"
        if self.recent is None or self.long_run is None:
            return "no rewards yet"
        short = self.config.short  # the recent mean is a plain mean until that many calls
        over = f"the last ~{short} calls" if self.calls >= short else f"the {self.calls} calls so far"
        if self.long_run - self.recent > 0.02:
            what = f"success fell from {self.long_run:.0%} to {self.recent:.0%} over {over}"
        else:
            what = f"success steady at {self.recent:.0%} over {over}"
        drift = self.drifts[-1] if self.drifts else None
        if drift is not None and drift.tool in self.open_tools():
            what += f"; {drift.tool} re-opened: its success {drift.direction} at call {drift.at_call:,}"
        return f"{what}: ε {self.epsilon:.2f}"

    def open_tools(self) -> list[str]:
        return [tool for tool, until in self.reopened.items() if until > self.decisions]

    def fell(self, tool: str) -> bool:
        """Whether `tool` is re-opened because its rewards fell (the drift guard's newest word on it)."""
        if self.reopened.get(tool, 0) <= self.decisions:
            return False
        return next((d.direction == "fell" for d in reversed(self.drifts) if d.tool == tool), False)

    def observe(self, tool: str, normalised: float, worked: bool, at_call: int) -> Drift | None:
        """A learned call of `tool` with this normalised reward; the drift it revealed, if any. The
        drift guard watches whether calls work (1 or 0): a break is a change of that, and the reward's
        latency and rating parts would blur it."""
        c = self.config
        outcome = 1.0 if worked else 0.0
        self.calls += 1  # the running means start as plain means (no first call weighing for thousands)
        self.recent = (self.recent or 0.0) + (outcome - (self.recent or 0.0)) / min(self.calls, c.short)
        self.long_run = (self.long_run or 0.0) + (outcome - (self.long_run or 0.0)) / min(self.calls, c.long)
        previous = self.last.get(tool, outcome)
        self.last[tool] = previous + (outcome - previous) / 10
        if not c.drift:
            return None
        detector = self.detectors.get(tool)
        if detector is None:
            if len(self.detectors) >= 10_000:  # bounded: a catalogue's tools, not a log's worth
                self.detectors.clear()
            detector = self.detectors[tool] = PageHinkley()
        fired = detector.update(outcome, c.delta, c.threshold, c.min_calls)
        if fired is None:
            return None
        drift = Drift(tool, at_call, fired, detector.mean, self.last[tool])
        self.detectors[tool] = PageHinkley()
        self.reopened[tool] = self.decisions + c.reopen_calls
        self.drifts = [*self.drifts[-19:], drift]
        return drift

    def decided(self) -> None:
        self.decisions += 1
        if len(self.reopened) > 100:
            self.reopened = {t: u for t, u in self.reopened.items() if u > self.decisions}

    def explore(
        self, selection: Selection, arms: NDArray[np.int64], top_k: int, rng: np.random.Generator, tools: Interner
    ) -> Selection:
        """With probability ε (it rises when rewards fall), a uniform pick among the
        policy's top max(`top_k`, EXPLORE_POOL) and the tools the drift guard re-opened; the propensity
        is the mixture's. While a re-opened tool is among `arms`, ε is at least `REOPENED_EPSILON`; when
        the policy's pick is a tool whose rewards fell lately, at least `BROKEN_EPSILON` over its best
        `BROKEN_POOL`: its requests need another tool, maybe one the prior ranks low."""
        self.decided()
        opened = [a for name in self.open_tools() if (a := tools.get(name)) is not None]
        opened = [a for a in opened if a in arms]
        epsilon = max(self.epsilon, REOPENED_EPSILON if opened else 0.0)
        width = max(top_k, EXPLORE_POOL)
        if self.fell(tools.names[selection.chosen]):  # the pick broke lately: look wider, more often
            epsilon, width = max(epsilon, BROKEN_EPSILON), max(width, BROKEN_POOL)
        if epsilon <= 0.0:
            return selection
        pool = list(dict.fromkeys([*selection.ranked[:width].tolist(), *opened]))
        explored = bool(rng.random() < epsilon)
        pick = int(pool[int(rng.integers(len(pool)))]) if explored else selection.chosen
        propensity = (1 - epsilon) * (selection.propensity if pick == selection.chosen else 0.0) + epsilon / len(pool)
        ranked, scores, expected = selection.ranked, selection.scores, selection.expected
        agent, evidence, posterior = selection.agent, selection.evidence, selection.posterior
        if pick not in ranked.tolist():  # a re-opened tool below the shortlist joins the ranking
            ranked, scores, expected = np.append(ranked, pick), np.append(scores, scores[-1]), np.append(expected, 0.0)
            agent = None if agent is None else np.append(agent, 0.0)
            evidence = None if evidence is None else np.append(evidence, 0.0)
            posterior = None if posterior is None else np.append(posterior, 0.0)
        order = np.argsort(ranked != pick, kind="stable")  # the pick first, the rest as ranked
        return Selection(
            ranked.take(order),
            scores.take(order),
            expected.take(order),
            pick,
            selection.explored or (explored and pick != selection.chosen),
            propensity,
            agent=None if agent is None else agent.take(order),
            evidence=None if evidence is None else evidence.take(order),
            failing=None if selection.failing is None else np.append(selection.failing, False)[: len(order)][order],
            posterior=None if posterior is None else posterior.take(order),
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "recent": self.recent,
            "long_run": self.long_run,
            "calls": self.calls,
            "decisions": self.decisions,
            "detectors": {t: asdict(d) for t, d in self.detectors.items()},
            "last": dict(self.last),
            "reopened": dict(self.reopened),
            "drifts": [asdict(d) for d in self.drifts],
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """A state (its config is this learner's own: only what was learned is loaded)."""
        self.recent, self.long_run = state["recent"], state["long_run"]
        self.calls, self.decisions = int(state["calls"]), int(state["decisions"])
        self.detectors = {t: PageHinkley(**d) for t, d in state["detectors"].items()}
        self.last = {t: float(v) for t, v in state["last"].items()}
        self.reopened = {t: int(u) for t, u in state["reopened"].items()}
        self.drifts = [Drift(**d) for d in state["drifts"]]
