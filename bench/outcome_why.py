"""Why toolwise's top-1 misses a recurring confusion: for bench/outcomes_direct.py's `--why`, what the outcome
policy saw at each confused request of a window (the choice model's first tools, each with its P(works) and
evidence as the verdicts read them, its fit across requests) and which of its gates kept the agent's habit,
or another wrong tool, first. The policy's own methods are wrapped to listen; nothing it decides changes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from imperfect_agent import Stream, Trouble
from numpy.typing import NDArray

from toolwise.rl import Learner
from toolwise.rl.policies.outcome import OutcomeModel

AMONG = 5  # the choice model's first tools a row shows (the lead's `among`)


@dataclass
class Probe:
    """What the outcome policy read at one `select`."""

    ranked: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    p_agent: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    p_works: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))  # the gate's: what the verdicts read
    evidence: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    failing: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    working: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    fit: NDArray[np.float64] | None = None  # across requests, the first AMONG (None: the lead was not asked)
    lead: int = 0
    earned: bool | None = None
    explored: bool = False
    first: int = -1  # the tool recommended first


def listen(learn: Learner) -> list[Probe]:
    """Wraps the outcome policy's `select` and its parts; one Probe per `select`, in order."""
    policy = learn.policy
    if not isinstance(policy, OutcomeModel):
        raise TypeError(f"--why reads the outcome policy, not {policy.name!r}")
    probes: list[Probe] = []
    choice_select, verdicts, lead, select = policy.choice.select, policy.verdicts, policy.lead, policy.select

    def on_choice(*args: Any) -> Any:
        chosen = choice_select(*args)
        probes[-1].ranked, probes[-1].p_agent, probes[-1].explored = chosen.ranked, chosen.expected, chosen.explored
        return chosen

    def on_verdicts(p_works: NDArray[np.float64], evidence: NDArray[np.float64]) -> Any:
        probes[-1].p_works, probes[-1].evidence = p_works.copy(), evidence.copy()
        failing, working = verdicts(p_works, evidence)
        probes[-1].failing, probes[-1].working = failing, working
        return failing, working

    def on_lead(context: Any, ranked: NDArray[np.int64], x: NDArray[np.float64], *rest: Any) -> int:
        probes[-1].fit = policy.across.predict(ranked[:AMONG], x)
        probes[-1].lead = at = lead(context, ranked, x, *rest)
        probes[-1].earned = policy.trials.earned()
        return at

    def on_select(*args: Any) -> Any:
        probes.append(Probe())
        selection = select(*args)
        probes[-1].first = int(selection.ranked[0])
        return selection

    # wrappers that listen and call through: the same signatures, typed loosely
    policy.choice.select = on_choice  # type: ignore[method-assign,assignment]
    policy.verdicts = on_verdicts  # type: ignore[method-assign]
    policy.lead = on_lead  # type: ignore[method-assign,assignment]
    policy.select = on_select  # type: ignore[method-assign,assignment]
    return probes


def reason(probe: Probe, right: NDArray[np.bool_], habit: NDArray[np.bool_], clearly: float, below: float) -> str:
    """The gate that kept a wrong tool first (`right`, `habit`: per ranked tool, right / the agent's confusion)."""
    if right[: len(probe.ranked)].take(0) and probe.first == probe.ranked[0]:
        return "hit: the choice model's first"
    if probe.explored:
        return "explored"
    if probe.failing[0]:
        return "overridden, to a wrong tool" if probe.first != probe.ranked[0] else "overridden, nothing else"
    first = "habit" if habit[0] else "another wrong tool"
    if probe.working[0]:
        return f"{first} first, predicted to work by its own outcomes"
    if not right[:AMONG].any():
        return f"{first} first, no right tool in the first {AMONG}"
    if probe.fit is None:
        return f"{first} first, the lead not asked (not a session's first call)"
    fit = probe.fit
    if fit[0] >= below and not probe.failing[1:AMONG].any():
        return f"{first} first, not predicted to fail across requests (fit ≥ {below}), none of the others seen to fail"
    at = int(np.flatnonzero(right[: len(fit)])[0])
    if fit[at] <= fit[0] + clearly:
        return f"{first} first, the right tool not {clearly} better across requests"
    if probe.failing[at]:
        return f"{first} first, the right tool predicted to fail by its own outcomes"
    if probe.lead == 0 and not probe.earned:
        return f"{first} first, lead not earned (Trials)"
    if probe.lead and probe.lead != at:
        return f"{first} first, another tool fit better across requests"
    return f"{first} first, other"


def explain(learn: Learner, probes: list[Probe], stream: Stream, trouble: list[Trouble], start: int, end: int) -> None:
    """Prints, per confused request in positions start..end−1 that toolwise's top-1 missed, what it read,
    then the count of each reason over the window."""
    names = learn.index.tools.names
    policy = learn.policy
    assert isinstance(policy, OutcomeModel)
    c = policy.config
    confused = stream.on_confused()
    counts: Counter[str] = Counter()
    print(f"\nwhy toolwise's top-1 missed the recurring confusions, requests {start + 1}–{end}:")
    for i in range(start, end):
        if not confused[i]:
            continue
        probe, request = probes[i], stream.request(i)
        tools = [names[a] for a in probe.ranked.tolist()]
        right = np.array([t in request.right for t in tools])
        habit = np.array([t == trouble[int(stream.order[i])].confusion for t in tools])
        why = "hit" if names[probe.first] in request.right else reason(probe, right, habit, c.clearly, c.fails_below)
        counts[why] += 1
        if why.startswith("hit"):
            continue
        before = [j for j in range(i) if stream.order[j] == stream.order[i]]
        seen = ", ".join(
            f"{stream.choice[j]}{'✓' if stream.right(j, stream.choice[j]) else '✗'}"
            f"({'works' if stream.outcome(j, stream.choice[j]).good else 'fails'})"
            for j in before
        )
        print(f"  [{i + 1}] {request.query[:70]!r} right {request.right[0]} · before: {seen or 'never'}")
        print(f"     {why}; lead {probe.lead} earned {probe.earned}")
        for k in range(min(AMONG, len(tools))):
            mark = "R" if right[k] else ("H" if habit[k] else " ")
            fit = "" if probe.fit is None or k >= len(probe.fit) else f" fit {probe.fit[k]:.2f}"
            print(
                f"     {mark} {tools[k][:40]:<40} p_agent {probe.p_agent[k]:.3f} p_works {probe.p_works[k]:.2f} "
                f"evidence {probe.evidence[k]:.2f}{fit}"
            )
        outside = [k for k in range(AMONG, len(tools)) if right[k]]
        if outside:
            k = outside[0]
            shown = f"p_agent {probe.p_agent[k]:.3f} evidence {probe.evidence[k]:.2f}"
            print(f"     R {tools[k][:40]:<40} at {k + 1}: {shown}")
    print("\n  " + "\n  ".join(f"{n:4d}  {why}" for why, n in counts.most_common()))
    actions(learn, probes, stream, start, end)


def actions(learn: Learner, probes: list[Probe], stream: Stream, start: int, end: int) -> None:
    """Over every request of the window, confused or not: how often each mechanism put another tool first
    than the choice model's, and how often its first and the choice model's first were right."""
    names = learn.index.tools.names
    confused = stream.on_confused()
    head = f"{'requests':>8} {'confused':>8} {'its first right':>15} {'choice first right':>18}"
    print(f"\n  {'what put the first':<34} {head}")
    for action in ("choice model's first", "override (first fails)", "lead (across requests)", "explored"):
        rows = [i for i in range(start, end) if action == kind(probes[i])]
        if not rows:
            continue
        first = np.mean([names[probes[i].first] in stream.request(i).right for i in rows])
        choice = np.mean([names[int(probes[i].ranked[0])] in stream.request(i).right for i in rows])
        print(f"  {action:<34} {len(rows):>8} {int(confused[rows].sum()):>8} {first:15.3f} {choice:18.3f}")
    policy = learn.policy
    assert isinstance(policy, OutcomeModel)
    record = policy.trials.record
    first, other = record[0].round(1).tolist(), record[1].round(1).tolist()
    print(f"  Trials' record (worked, failed): the first {first}, the other {other}")


def kind(probe: Probe) -> str:
    if probe.explored:
        return "explored"
    if probe.first == probe.ranked[0]:
        return "choice model's first"
    return "lead (across requests)" if probe.lead else "override (first fails)"
