"""What bench/outcomes.py prints: per arm, the gain of following it over the agent alone, its top-1 on
the agent's recurring confusions by window, and the reliability of its confidence, each beside issue 34's
target; a verdict per set and agent for the summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from imperfect_agent import Stream
from numpy.typing import NDArray

LAST = 1_000  # requests the accuracies are taken over, at the end of the stream
WINDOW = 500  # requests per window of the confusions' table
GAIN_AT_60, GAIN_AT_80 = 0.08, 0.0  # issue 34's targets: following toolwise at 60% / at 80%
ON_CONFUSIONS, WITHIN = 0.40, 2_500  # toolwise's top-1 on the recurring confusions, within this many requests
ECE_TARGET = 0.05


@dataclass(frozen=True)
class Arm:
    """What one arm did at each position of the stream (data-set tool names)."""

    top: list[str]  # the recommender's top-1
    confidence: NDArray[np.float64]
    p_agent: NDArray[np.float64]  # nan where recommend_tool reports none
    called: list[str]


def verdict(ok: bool) -> str:
    return "pass" if ok else "FAIL"


def reliability(
    confidence: NDArray[np.float64], right: NDArray[np.float64], bins: int = 10, observed: str = "works"
) -> tuple[list[str], float]:
    """A reliability table (equal-width bins of confidence against the `observed` rate) and the expected
    calibration error."""
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    lines, ece = [f"{'confidence':>12} {'requests':>9} {'mean':>6} {observed:>6}"], 0.0
    for b in range(bins):
        inside = which == b
        if not inside.any():
            continue
        mean, rate = float(confidence[inside].mean()), float(right[inside].mean())
        ece += inside.mean() * abs(mean - rate)
        lines.append(f"{b / bins:5.1f}–{(b + 1) / bins:<5.1f} {int(inside.sum()):>9} {mean:6.3f} {rate:6.3f}")
    return lines, ece


def by_window(hits: NDArray[np.float64], mask: NDArray[np.bool_]) -> list[float]:
    return [
        float(hits[start : start + WINDOW][mask[start : start + WINDOW]].mean())
        if mask[start : start + WINDOW].any()
        else float("nan")
        for start in range(0, len(hits), WINDOW)
    ]


@dataclass(frozen=True)
class Verdict:
    """Toolwise's figures against issue 34's targets, for one data set and agent."""

    label: str
    gain: float  # accuracy following it minus the agent alone's, last LAST requests
    gain_target: float
    on_confusions: float  # its top-1 on the recurring confusions, in the window ending at WITHIN
    ece: float

    def row(self) -> str:
        return (
            f"  {self.label:<30} gain {100 * self.gain:+5.1f} (≥ {100 * self.gain_target:+.0f}) "
            f"{verdict(self.gain >= self.gain_target)} · confusions {self.on_confusions:.3f} (≥ {ON_CONFUSIONS}) "
            f"{verdict(self.on_confusions >= ON_CONFUSIONS)} · ECE {self.ece:.3f} (≤ {ECE_TARGET}) "
            f"{verdict(self.ece <= ECE_TARGET)}"
        )

    @classmethod
    def mean(cls, label: str, runs: list[Verdict]) -> Verdict:
        """The figures averaged over runs (seeds) of one set and agent."""
        figures = [float(np.mean([getattr(v, f) for v in runs])) for f in ("gain", "on_confusions", "ece")]
        return cls(label, figures[0], runs[0].gain_target, figures[1], figures[2])


def following(stream: Stream, arms: dict[str, tuple[Arm, Arm]], target: float) -> dict[str, float]:
    """The last LAST requests: each recommender's top-1 and the agent following it; the gains."""
    agent, tail = stream.hits(stream.choice), slice(-LAST, None)
    head = f"last {min(LAST, len(agent)):,} requests"
    print(f"{head:<38} {'top-1':>6} {'overrode':>9} {'agent+it':>9} {'gain':>7}")
    print(f"  {'agent alone':<36} {'':>6} {'':>9} {agent[tail].mean():9.3f}")
    gains = {}
    for name, (counterfactual, live) in arms.items():
        overrode = np.array([c != own for c, own in zip(live.called, stream.choice, strict=True)], dtype=float)
        followed = stream.hits(live.called)[tail].mean()
        gains[name] = gain = float(followed - agent[tail].mean())
        line = f"  {name:<36} {stream.hits(counterfactual.top)[tail].mean():6.3f} {overrode[tail].mean():9.1%}"
        line += f" {followed:9.3f} {100 * gain:+6.1f}"
        if name.startswith("toolwise"):
            line += f"   target ≥ {100 * target:+.0f} points: {verdict(gain >= target)}"
        print(line)
    return gains


def confusions(stream: Stream, arms: dict[str, tuple[Arm, Arm]], toolwise: str) -> float:
    """Right on the recurring confusions, by window; toolwise's top-1 in the window ending at WITHIN."""
    agent, confused = stream.hits(stream.choice), stream.on_confused()
    windows = [f"{s + 1}–{min(s + WINDOW, len(agent))}" for s in range(0, len(agent), WINDOW)]
    print("\non the recurring confusions, right by window (requests): " + " ".join(f"{w:>10}" for w in windows))
    rows = {"agent alone": agent}
    for name, (counterfactual, live) in arms.items():
        rows[f"{name} top-1"] = stream.hits(counterfactual.top)
        rows[f"{name} followed (live)"] = stream.hits(live.called)
    for name, hits in rows.items():
        print(f"  {name:<55}" + " ".join(f"{v:10.3f}" for v in by_window(hits, confused)))
    reached = by_window(rows[f"{toolwise} top-1"], confused)[: max(1, WITHIN // WINDOW)][-1]
    target = f"top-1 ≥ {ON_CONFUSIONS} by request {WITHIN:,}: {reached:.3f} {verdict(reached >= ON_CONFUSIONS)}"
    print(f"  target: {toolwise} {target}")
    return reached


def calibration(stream: Stream, arm: Arm, toolwise: str) -> float:
    """The reliability of `confidence` (would a call of the top-1 work? `Stream.works`) and, where reported,
    of `p_agent` (is it the agent's own choice?); the expected calibration error of `confidence`."""
    lines, ece = reliability(arm.confidence, stream.works(arm.top))
    print(f"\nreliability of {toolwise}'s confidence in its top-1 (counterfactual arm, every request):")
    print("\n".join("  " + line for line in lines))
    print(f"  expected calibration error {ece:.3f}; target ≤ {ECE_TARGET}: {verdict(ece <= ECE_TARGET)}")
    shown = ~np.isnan(arm.p_agent)
    if not shown.any():
        print("  p_agent: n/a (recommend_tool reports none)")
        return ece
    calls = np.array([t == own for t, own in zip(arm.top, stream.choice, strict=True)], dtype=float)
    _, agent_ece = reliability(arm.p_agent[shown], calls[shown], observed="called")
    print(
        f"  p_agent: mean {arm.p_agent[shown].mean():.3f}; the agent called the top-1 {calls[shown].mean():.3f} "
        f"of the time; calibration error {agent_ece:.3f}"
    )
    return ece


def report(label: str, stream: Stream, accuracy: float, arms: dict[str, tuple[Arm, Arm]]) -> Verdict:
    agent, confused = stream.hits(stream.choice), stream.on_confused()
    print(
        f"\nagent right {accuracy:.0%} (measured {agent.mean():.3f}; on its recurring confusions "
        f"{agent[confused].mean():.3f}, {confused.mean():.0%} of the requests)"
    )
    target = GAIN_AT_60 if accuracy <= 0.7 else GAIN_AT_80
    toolwise = next(name for name in arms if name.startswith("toolwise"))
    gain = following(stream, arms, target)[toolwise]
    reached = confusions(stream, arms, toolwise)
    ece = calibration(stream, arms[toolwise][0], toolwise)
    return Verdict(label, gain, target, reached, ece)
