"""The outcome policy (the default): which tool the agent will call, corrected by whether it will work.

Two questions, two models. The choice model (choice.py) learns which tool the agent calls for a request,
from every call it makes: far ahead on chains of right calls, but a model of the agent converges to the
agent's own recurring mistakes (a wrong call that "succeeded" unrated is a choice like any other). The
outcome memory (rl/outcomes.py) learns from outcomes only whether a call of a tool works for a request,
with the evidence it rests on. A recommendation follows the choice model's ranking, and overrides the
tool the agent habitually calls only where that tool is predicted to fail with enough evidence: then a
tool predicted to work comes first, else the next not yet seen to fail, or on a session's first call one
that fits clearly better across requests (`replacement`; `OutcomeModelConfig`). Where the
request's own outcomes say nothing either way, on a session's first call, what the tools' calls did across
requests (rl/across.py) may put another first: see `lead`. Its estimate (`expected`, the confidence a
client acts on) is P(works): the posterior the verdicts read (`Selection.posterior`; they count a blend of
other requests' calls as what it says of this one: rl/mixture.py), where it is ≥ ½ read with a second map's
prior mean (`reported_of`); the choice model's probability is reported beside it (`Selection.agent`).
The posterior is not recalibrated on the recommendations a client followed: a consulting agent calls the
recommended tool mostly where it would have called it anyway, right far more often than where it passes it
over (BFCL live, an agent right 80%: 0.95 against 0.54), so a map learned on those made the confidence
too high (expected calibration error 0.095, against 0.05 for the posterior itself); nor on calls of another
tool, which say nothing of the recommended one where requests have several right tools.

A failed call teaches only what it says: the learner reads it in hindsight (rl/hindsight.py) and hands
each lesson its `fit` (1 worked, 0 did not fit the request, None: says nothing of the fit, e.g. a retry
after bad arguments, a timeout) apart from `worked` (what the choice model learns: the agent did choose it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.across import AcrossConfig, FitAcross, Trials, clearly_better
from toolwise.rl.calibration import Calibration
from toolwise.rl.context import Context
from toolwise.rl.outcomes import Estimate, OutcomeConfig, OutcomeMemory, Served
from toolwise.rl.policies.base import (
    Capabilities,
    Lesson,
    Lessons,
    PolicyBase,
    Selection,
    Update,
    called_at,
    check_state,
    state_head,
)
from toolwise.rl.policies.choice import ChoiceModel
from toolwise.rl.policies.choice_config import ChoiceConfig


@dataclass(frozen=True, slots=True)
class OutcomeModelConfig:
    choice: ChoiceConfig = field(default_factory=ChoiceConfig)
    outcomes: OutcomeConfig = field(default_factory=OutcomeConfig)
    enough: float = 1.0  # evidence (kernel-weighted calls) a verdict of "fails" or "works" needs
    fails_below: float = 0.5  # P(works) under which a tool with enough evidence is predicted to fail
    works_above: float = 0.6  # P(works) from which a tool with enough evidence is predicted to work
    across: AcrossConfig = field(default_factory=AcrossConfig)
    clearly: float = 0.2  # predicted fit across requests by which another tool must beat the first to lead
    among: int = 5  # the choice model's first tools the fit across requests chooses among
    reported_slope: float = 0.5  # the least slope on logit p_agent of the reported confidence's map
    held_under: float = 0.5  # P(works) under which the confidence reported is the posterior itself (> 1: always)

    def __post_init__(self) -> None:
        if self.enough <= 0 or not 0 < self.fails_below <= self.works_above < 1:
            raise ValueError(
                "need enough > 0 and 0 < fails_below ≤ works_above < 1; got "
                f"{self.enough}, {self.fails_below}, {self.works_above}"
            )
        if self.clearly <= 0 or self.among < 2:
            raise ValueError(f"need clearly > 0 and among ≥ 2, got {self.clearly}, {self.among}")
        if self.reported_slope < 0 or self.held_under < 0:
            raise ValueError(
                f"need reported_slope ≥ 0 and held_under ≥ 0, got {self.reported_slope}, {self.held_under}"
            )


@dataclass(frozen=True, slots=True)
class Judged:
    """`OutcomeModel.judge`'s reading of the choice model's ranked arms, each array in that order but `order`."""

    x: NDArray[np.float64]  # the request's features
    estimate: Estimate  # P(works) and its evidence; a tool put first for its fit across requests read with it
    failing: NDArray[np.bool_]  # predicted to fail, on enough evidence (the verdicts)
    working: NDArray[np.bool_]  # predicted to work, likewise
    order: NDArray[np.int64]  # the override's order (positions), a tool put first for its fit first
    reported: NDArray[np.float64]  # the confidence reported (`Selection.expected`)


class OutcomeModel(PolicyBase):
    name: ClassVar[str] = "outcome"
    SCHEMA: ClassVar[int] = 1
    capabilities: ClassVar[Capabilities] = Capabilities(candidates=True, learn_many=True, health=True, hindsight=True)

    def __init__(self, config: OutcomeModelConfig | None = None) -> None:
        super().__init__()
        self.config = c = config or OutcomeModelConfig()
        self.choice = ChoiceModel(c.choice)
        self.health = self.choice.health  # one table: the choice model ranks by it
        self.memory = OutcomeMemory(c.choice.dim, c.outcomes)
        self.across = FitAcross(c.choice.dim, c.across)
        self.trials = Trials()
        # p_agent → the prior mean, "not known" (0.5) until outcomes say more
        self.calibration = Calibration(c.outcomes.calibration_rate, min_slope=1.0, start=c.outcomes.start)
        # (p_agent, the query–tool cosine) → the prior mean the reported confidence is read with (`reported`)
        self.reported = reported_map(c)

    # -- deciding ----------------------------------------------------------------------------------

    def select(
        self, context: Context, arms: NDArray[np.int64], inputs: NDArray[np.float64], rng: np.random.Generator
    ) -> Selection:
        chosen = self.choice.select(context, arms, inputs, rng)
        p_agent = chosen.expected
        first_call = not chosen.explored and context.previous_tool is None
        judged = self.judge(context, chosen.ranked, p_agent, arms, inputs, promote=first_call)
        failing, estimate = judged.failing, judged.estimate
        lead = self.lead(context, chosen.ranked, judged.x, failing, judged.working) if first_call else 0
        if not failing.any() and not lead:  # nothing to override (the usual case): the choice model's order, as it is
            return Selection(
                chosen.ranked,
                chosen.scores,
                judged.reported,
                int(chosen.ranked[0]),
                chosen.explored,
                chosen.propensity,
                agent=p_agent,
                evidence=estimate.evidence,
                failing=failing,
                posterior=estimate.p_works,
            )
        order = judged.order
        if chosen.explored:  # the choice model's exploration keeps its pick first
            order = np.concatenate(([0], order[order != 0]))
        elif lead:
            order = np.concatenate(([lead], order[order != lead]))
        ranked = chosen.ranked.take(order)
        return Selection(
            ranked,
            chosen.scores.take(order),
            judged.reported.take(order),
            int(ranked[0]),
            chosen.explored,
            chosen.propensity,
            agent=p_agent.take(order),
            evidence=estimate.evidence.take(order),
            failing=failing.take(order),
            posterior=estimate.p_works.take(order),
        )

    def judge(
        self,
        context: Context,
        ranked: NDArray[np.int64],
        p_agent: NDArray[np.float64],
        arms: NDArray[np.int64],
        inputs: NDArray[np.float64],
        *,
        promote: bool,
    ) -> Judged:
        """What the outcome evidence makes of the choice model's `ranked` arms (best first; `p_agent`, their
        probabilities): the verdicts, the override's order and the confidence reported of each, the one place
        that decides it, for `select` and for what an admin inspects (`expected`). `promote`: a session's first
        call, the choice model not exploring: a first predicted to fail may give way to a tool that fits
        clearly better across requests (`replacement`), its confidence read with that fit."""
        x, prior = self.choice.features(context), self.calibration.mean(p_agent)
        estimate = self.memory.estimate(ranked, x, prior, self.memory.mixture())
        gate = estimate.gate  # each prototype read as one request's evidence (rl/mixture.py)
        assert gate is not None  # a mixture was given
        self._broken(ranked, estimate.p_works)
        self._broken(ranked, gate.p_works)
        failing, working = self.verdicts(gate.p_works, gate.evidence)  # on the evidence's own posterior
        shift = self.shift(ranked, arms, inputs, p_agent, prior, estimate)
        order = self.order(failing, working)
        if promote and failing[0]:
            first = int(order[0])
            order = self.replacement(ranked, x, failing, working, order, estimate, prior)
            if order[0] != first:  # put first for its fit across requests, and read with it
                shift[order[0]] = 0.0
        return Judged(x, estimate, failing, working, order, self.reported_of(estimate.p_works, shift))

    def shift(
        self,
        ranked: NDArray[np.int64],
        arms: NDArray[np.int64],
        inputs: NDArray[np.float64],
        p_agent: NDArray[np.float64],
        prior: NDArray[np.float64],
        estimate: Estimate,
    ) -> NDArray[np.float64]:
        """What reading each ranked arm's P(works) with the reported map's prior mean (p_agent and the
        query–tool cosine, `inputs`' first column) instead of the verdicts' adds to it: s₀(m′ − m)/(s₀ + E),
        times a broken tool's recent success rate as its P(works) is."""
        at = np.empty(int(arms.max()) + 1, dtype=np.int64)
        at[arms] = np.arange(len(arms))
        cosine = inputs[at.take(ranked), 0]
        shift = self.memory.reread(self.reported.mean(p_agent, cosine), prior, estimate.evidence)
        self._broken(ranked, shift)
        return shift

    def reported_of(self, p_works: NDArray[np.float64], shift: NDArray[np.float64]) -> NDArray[np.float64]:
        """The confidence reported (`Selection.expected`): the P(works) the verdicts read where it is under
        `held_under`, else read with the reported map's prior mean (`shift`). The map of p_agent alone is held
        at slope ≥ 1 for the verdicts (the calls it learns on say little of the tools the agent passes over);
        reported through it, the top-1s read high on BFCL live and low on NESTFUL (expected calibration error
        up to 0.054). The cosine separates them, its slope ≥ 0.5 pulls BFCL live's high p_agent down; held under
        ½ it lifts no confidence across the ≥ ½ an agent follows at (lifted, the low ones lost 1.5–3.9 points of
        the following agent's gain at 80%): docs/benchmarks.md."""
        reported: NDArray[np.float64] = np.where(p_works >= self.config.held_under, p_works + shift, p_works)
        return reported

    def lead(
        self,
        context: Context,
        ranked: NDArray[np.int64],
        x: NDArray[np.float64],
        failing: NDArray[np.bool_],
        working: NDArray[np.bool_],
    ) -> int:
        """The position (among the choice model's first `among`) of a tool that goes before the first, 0 for
        none: where the request's own outcomes predict the first neither to fail nor to work, but either
        what its calls did across requests predicts it to fail (fit under `fails_below`) or another of the
        first `among` was seen to fail here (the agent's habit for the request, which the choice model has
        learned against: its next is a guess), and another tool fits `clearly` better across requests; only
        once such leads have proved right (`Trials`). On a session's first call only (the caller's gate):
        later, the next tool is what the sequence says."""
        c = self.config
        top = min(c.among, len(ranked))
        best = 0
        if top >= 2 and not failing[0] and not working[0]:
            fit = self.across.predict(ranked[:top], x)
            if fit[0] < c.fails_below or failing[1:top].any():
                best = clearly_better(fit, 0, ~failing[:top], c.clearly)
        if not best:
            self.trials.drop(context.hash)
            return 0
        self.trials.note(context.hash, int(ranked[0]), int(ranked[best]))
        return best if self.trials.earned() else 0

    def replacement(
        self,
        ranked: NDArray[np.int64],
        x: NDArray[np.float64],
        failing: NDArray[np.bool_],
        working: NDArray[np.bool_],
        order: NDArray[np.int64],
        estimate: Estimate,
        prior: NDArray[np.float64],
    ) -> NDArray[np.int64]:
        """The override's `order` with its first replaced where no tool is predicted to work: by the tool
        not seen either way among the choice model's first `among` that fits `clearly` better across
        requests than the one it would put first. The request's own outcomes showed the agent's habit to
        fail; of the tools they say nothing of, the choice model's order is that habit's (BFCL live, an agent
        right 80%: its next was right 4 times in 13). Its P(works) is read with its fit across requests as
        the prior mean (in `estimate`, in place): put first for that fit, it works more often than the
        agent's choice of it says. A session's first call only (the caller's)."""
        c = self.config
        top, first = min(c.among, len(ranked)), int(order[0])
        if first >= top or working[first]:
            return order
        fit = self.across.predict(ranked[:top], x)
        best = clearly_better(fit, first, ~failing[:top], c.clearly)
        if not best:
            return order
        mean = min(max(float(fit[best]), 0.0), 1.0)
        estimate.p_works[best] += self.memory.reread(mean, prior[best], estimate.evidence[best])
        return np.concatenate(([best], order[order != best]))

    def verdicts(
        self, p_works: NDArray[np.float64], evidence: NDArray[np.float64]
    ) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
        """Which arms are predicted to fail and which to work, each on enough evidence."""
        c = self.config
        enough = evidence >= c.enough
        return enough & (p_works < c.fails_below), enough & (p_works >= c.works_above)

    @staticmethod
    def order(fails: NDArray[np.bool_], works: NDArray[np.bool_]) -> NDArray[np.int64]:
        """The choice model's ranking (positions 0..n−1), with the override: where its first is predicted
        to fail, those predicted to work come first, then those with too little evidence either way, and
        those predicted to fail last (each tier in the choice model's order): following a tool seen to
        fail here is worth less than one not yet tried. Elsewhere only the tools predicted to fail below
        the first move down."""
        if fails[0]:
            tier = np.where(works, 0, np.where(fails, 2, 1))
        else:
            tier = fails.astype(np.int64)
            tier[0] = 0
        order: NDArray[np.int64] = np.argsort(tier, kind="stable")
        return order

    def expected(self, context: Context, arms: NDArray[np.int64], inputs: NDArray[np.float64]) -> NDArray[np.float64]:
        """The confidence `select` reports of each arm for the request, as it decides it (`judge`), not the
        posterior the verdicts read: what an admin inspects is what recommend_tool told the agent. The choice
        model's shortlist is judged as `select` ranks it without exploring; an arm outside it (never ranked)
        as it would be reported without the override."""
        p_agent = self.choice.expected(context, arms, inputs)
        order = np.argsort(-p_agent, kind="stable")  # the choice model's order (ties aside, as `select` ranks)
        reported = np.empty(len(arms))
        first_call = context.previous_tool is None
        for part, promote in (
            (order[: self.config.choice.shortlist], first_call),
            (order[self.config.choice.shortlist :], False),
        ):
            if len(part):
                judged = self.judge(context, arms.take(part), p_agent.take(part), arms, inputs, promote=promote)
                reported[part] = judged.reported
        return reported

    def served(self, context: Context, arms: NDArray[np.int64], *, coherence: bool = True) -> Served:
        """How near the request comes to those each of `arms` worked for (the outcome memory's prototypes)."""
        return self.memory.served(arms, self.choice.features(context), coherence=coherence)

    def failed_near(self, context: Context, within: float) -> int:
        """How many requests seen only failing, on any tool, lie within `within` (cosine) of this one."""
        return self.memory.failed_near(self.choice.features(context), within)

    def _broken(self, arms: NDArray[np.int64], p_works: NDArray[np.float64]) -> None:
        """A tool that broke lately works as often as it did lately, whatever it did before for the
        request: its P(works) times its recent success rate (`health` holds its log)."""
        for arm, offset in self.health.items():
            p_works[arms == arm] *= math.exp(offset)

    # -- learning ----------------------------------------------------------------------------------

    def learn_one(self, lesson: Lesson, rng: np.random.Generator) -> Update:
        """The choice model learns the call as the agent's choice (`worked`); the outcome memory and
        the calibration learn its `fit`, or revise it (`fit_before`: a rating changed the outcome of a
        call already counted; the choice model learns a rating as a second, stronger step)."""
        update = self.choice.learn_one(lesson, rng)
        if lesson.fit is None:
            return update
        x, cosine = self.choice.features(lesson.context), called_cosine(lesson)
        if lesson.fit_before is not None:
            change = lesson.fit - lesson.fit_before
            p_agent = (1.0 if lesson.worked else 0.0) - update.td_error
            self.calibration.revise(p_agent, change)
            self.reported.revise(p_agent, change, cosine)
            self.memory.revise(lesson.arm, x, change, -change)
            self.across.revise(lesson.arm, x, change)
            self.trials.count(lesson.context.hash, lesson.arm, change, -change)
            return update
        p_before = (1.0 if lesson.worked else 0.0) - update.td_error  # the called tool's choice probability
        self._learn_fit(lesson.arm, x, p_before, lesson.fit, cosine)
        self.trials.count(lesson.context.hash, lesson.arm, lesson.fit, 1.0 - lesson.fit)
        return update

    def _learn_fit(self, arm: int, x: NDArray[np.float64], p_agent: float, fit: float, cosine: float) -> None:
        """The prior's calibrations learn from what they said of the call, then the memory counts it."""
        self.calibration.learn(p_agent, fit)
        self.reported.learn(p_agent, fit, cosine)
        self.memory.add(arm, x, fit, 1.0 - fit)
        self.across.add(arm, x, fit)

    def learn_many(self, lessons: Lessons, rng: np.random.Generator) -> None:
        """`learn_one` of each call of a run in order: the choice model in minibatches, then the calibration,
        the outcome memory and the fit across requests call by call (each state apart: the same as
        interleaved), x(q) a context's once."""
        x = self.choice.features_of(lessons.contexts)
        run = self.choice.learn_run(lessons, rng, x)
        lessons.pause()
        fit = lessons.fit if lessons.fit is not None else lessons.worked.astype(np.float64)
        learned = np.flatnonzero(~np.isnan(fit))
        fits, p_before = fit.take(learned).tolist(), run.p_before.take(learned).tolist()
        self.calibration.learn_many(p_before, fits)
        self.reported.learn_many(p_before, fits, run.cosine.take(learned).tolist())
        arms, rows = lessons.arms.take(learned).tolist(), lessons.context_of.take(learned).tolist()
        self.memory.add_many(arms, x.astype(np.float32), rows, fits)
        self.across.add_many(arms, x, rows, fits)

    def set_health(self, arm: int, success_rate: float | None) -> None:
        self.choice.set_health(arm, success_rate)

    def forget(self, arm: int) -> None:
        """The tool changed (the drift guard saw its rewards move): its choice weights and its outcome
        evidence start afresh."""
        self.choice.forget(arm)
        self.memory.forget(arm)
        self.across.forget(arm)

    def finish_batches(self) -> None:
        self.choice.finish_batches()

    # -- state -------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            **state_head(self.name, self.SCHEMA, self.config),
            "choice": self.choice.state_dict(),
            "memory": self.memory.state_dict(),
            "across": self.across.state_dict(),
            "trials": self.trials.state_dict(),
            "calibration": self.calibration.state_dict(),
            "reported": self.reported.state_dict(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        check_state(state, self.name, self.SCHEMA)
        self.choice.load_state(state["choice"])
        self.health = self.choice.health
        self.memory.load_state(state["memory"])
        self.across, self.trials = FitAcross(self.config.choice.dim, self.config.across), Trials()
        if "across" in state:  # a state saved before them: both learned afresh from the calls that follow
            self.across.load_state(state["across"])
            self.trials.load_state(state["trials"])
        self.calibration.load_state(state["calibration"])
        self.reported = reported_map(self.config)
        if "reported" in state:
            self.reported.load_state(state["reported"])
        else:  # a state saved before it: it starts where the verdicts' map is, the cosine's weight at 0
            self.reported.started_from(self.calibration)

    def nbytes(self) -> int:
        return int(self.choice.nbytes() + self.memory.nbytes() + self.across.nbytes())


def called_cosine(lesson: Lesson) -> float:
    """The query–tool cosine of the tool called (its row's first feature among the candidates)."""
    if lesson.candidates is None or lesson.rows is None:
        raise ValueError("the outcome policy learns a call among its candidates: the lesson has none")
    return float(lesson.rows[called_at(lesson.candidates, lesson.arm), 0])


def reported_map(config: OutcomeModelConfig) -> Calibration:
    """The reported confidence's map, as nothing has been learned (`OutcomeModel.reported_of`)."""
    c = config.outcomes
    return Calibration(c.calibration_rate, min_slope=config.reported_slope, start=c.start, cosine=True)
