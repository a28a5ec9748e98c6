"""Off-policy evaluation: what a candidate configuration would have earned on the logged decisions.

Every logged decision the agent followed carries the probability p the serving policy had of choosing
the tool that was called. A candidate replays the log in order (`OffPolicyReplay`) and picks a tool for
each logged decision's context; w = 1[its pick = the logged tool] / p weighs the logged reward r:

- IPS   (1/n) Σ w·r                                  unbiased, variance grows with 1/p
- SNIPS Σ w·r / Σ w                                  self-normalised: slightly biased, far steadier
- DR    (1/n) Σ q̂(x, a_cand) + w·(r − q̂(x, a_log))  doubly robust (Dudík, Langford & Li 2011)

The candidate's pick is one draw from its own distribution, so E[1[pick = a]] = π_cand(a | x) and the
estimates stay unbiased without asking a policy for its whole distribution (the Protocol has none).
q̂ is toolwise's per-tool diagonal ridge over the hashed context features (`DiagonalRidge`), fitted
on the logged decisions in log order, each predicted before it is learned (its error is independent
of the reward it corrects). Intervals are normal approximations with the empirical variance (SNIPS:
the delta method). Rewards are in reward units (about −9..+16), as the log keeps them. The estimators
themselves are rl/estimators.py.

Protocols: a learning candidate (`learning=True`) is the replay method of Li et al. (2011) with
importance weights: it learns from a logged decision only where its pick matched (what it would have
seen), and from every call that followed no decision. The estimate is then its average reward as it
learns, slowed to the matched decisions: a conservative figure for a learner that improves with data.
A frozen candidate learns every execution of a first part of the log (as toolwise's start-up replay
would after a switch), then is evaluated, without learning, on the rest (fixed-policy IPS/DR).

Refused (`ThinSupportError`, naming the numbers, `SupportRule`): too few decisions where the pick
matched, too small an effective sample size (Σw)²/Σw², or too many decisions where the logging policy
was certain (propensity ≈ 1: no other tool could have been logged) and the candidate picked another.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass, replace
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from toolwise.errors import UserError
from toolwise.rl.embedding import Embedder
from toolwise.rl.estimators import Estimates, Sums, ThinSupportError, estimate_sums
from toolwise.rl.learner import Learner, LearnerConfig
from toolwise.rl.policies import POLICIES, PolicyConfig
from toolwise.rl.policies.ridge import DiagonalRidge, RidgeConfig
from toolwise.rl.steps import Step
from toolwise.rl.toolindex import ToolDoc

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")


def has_setting(config: object, name: str) -> bool:
    """Whether the config, or a config it holds (the outcome policy's choice model, a linear policy's
    ridge), has the setting `name`."""
    if not is_dataclass(config):
        return False
    return any(f.name == name or has_setting(getattr(config, f.name), name) for f in fields(config))


def with_setting(config: C, name: str, value: float, missing: str) -> C:
    """`config` with its setting `name` (its own, else where a config it holds has it) set to `value`; a
    config without it is refused with `missing`."""
    if any(f.name == name for f in fields(config)):
        return replace(config, **{name: value})
    for f in fields(config):
        inner = getattr(config, f.name)
        if has_setting(inner, name):
            return replace(config, **{f.name: with_setting(inner, name, value, missing)})
    raise UserError(missing)


@dataclass(frozen=True, slots=True)
class Candidate:
    """A configuration to evaluate: a policy by name, optionally another ε or prior weight (None: the
    policy's default). With `learning` it learns while replaying (Li et al.); without, it is frozen."""

    policy: str
    epsilon: float | None = None
    prior_weight: float | None = None
    learning: bool = True

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise UserError(f"policy must be one of {sorted(POLICIES)}, got {self.policy!r}")
        self.policy_config()  # a setting the policy lacks, or a value out of range, fails here

    def policy_config(self) -> PolicyConfig | None:
        """The policy's config with ε and the prior weight replaced: a setting it lacks raises UserError,
        a value out of the config's range the config's own ValueError."""
        if self.epsilon is None and self.prior_weight is None:
            return None
        config: PolicyConfig = POLICIES[self.policy][1]()
        if self.epsilon is not None:
            config = with_setting(
                config, "epsilon", self.epsilon, f"policy {self.policy!r} has no ε to set (it explores by sampling)"
            )
            if has_setting(config, "epsilon_min"):  # a decaying ε (ucb) is held at the value asked for
                config = with_setting(config, "epsilon_min", self.epsilon, "")
        if self.prior_weight is not None:
            config = with_setting(
                config, "prior_weight", self.prior_weight, f"policy {self.policy!r} has no prior weight to set"
            )
        return config

    def describe(self) -> str:
        parts = [self.policy]
        if self.epsilon is not None:
            parts.append(f"ε={self.epsilon:g}")
        if self.prior_weight is not None:
            parts.append(f"prior weight {self.prior_weight:g}")
        parts.append("learning (replay)" if self.learning else "frozen")
        return ", ".join(parts)


@dataclass(frozen=True, slots=True)
class SupportRule:
    """When the log's support is too thin to answer (the defaults of the CLI and the admin tool)."""

    min_matches: int = 30  # logged decisions where the candidate picked the logged tool
    min_ess: float = 20.0  # effective sample size of the importance weights, (Σw)² / Σw²
    min_propensity: float = 1e-3  # a decision logged with a smaller propensity is left out (weight > 1000)
    # Decisions where the logging policy was (all but) sure of its own choice and the candidate picked
    # another tool: the log cannot say what that tool would have earned (IPS counts it as 0).
    max_unsupported: float = 0.05  # as a fraction of the decisions evaluated


@dataclass(slots=True)
class Logged:
    """One execution of the log as evaluation needs it: the step, and `decision`: it followed a
    recommendation; `propensity`: the serving policy's probability of the called tool (None: the agent
    called another tool than the one chosen, or the log predates propensities); `reward` in reward
    units (None: not learned, e.g. a cancelled call)."""

    step: Step
    reward: float | None
    propensity: float | None
    decision: bool


@dataclass(slots=True)
class Counts:
    """What the replay met: executions read, decisions, and why decisions were left out."""

    executions: int = 0
    decisions: int = 0
    evaluated: int = 0
    no_propensity: int = 0  # the agent called another tool than the one chosen, or no propensity logged
    tiny_propensity: int = 0
    no_reward: int = 0
    warm_up: int = 0  # executions the frozen candidate learned before the evaluation
    unsupported: int = 0  # evaluated decisions whose logged choice was (all but) certain and the candidate's another


@dataclass(frozen=True, slots=True)
class Evaluation:
    candidate: Candidate
    estimates: Estimates
    counts: Counts
    rule: SupportRule


def check_support(estimates: Estimates, counts: Counts, rule: SupportRule, candidate: Candidate) -> None:
    """Refuse (ThinSupportError, naming the numbers) where the log cannot support the candidate."""
    problems = []
    if estimates.matches < rule.min_matches:
        problems.append(
            f"the candidate picked the logged tool in {estimates.matches} of {estimates.n} logged decisions "
            f"(need ≥ {rule.min_matches})"
        )
    if estimates.ess < rule.min_ess:
        problems.append(f"the effective sample size is {estimates.ess:.1f} (need ≥ {rule.min_ess:g})")
    if counts.unsupported > rule.max_unsupported * estimates.n:
        problems.append(
            f"in {counts.unsupported} of {estimates.n} logged decisions the candidate picked a tool the logging "
            f"policy could not have picked (it logged its own choice with propensity > {1 - rule.min_propensity:g}), "
            f"{counts.unsupported / estimates.n:.0%} (allowed: {rule.max_unsupported:.0%})"
        )
    if problems:
        left_out = (
            f"{counts.decisions} decisions logged: {counts.evaluated} evaluated, {counts.no_propensity} without a "
            f"propensity (another tool called than chosen, or logged before propensities), "
            f"{counts.tiny_propensity} with one below {rule.min_propensity:g}, {counts.no_reward} without a reward"
        )
        raise ThinSupportError(
            f"the log's support is too thin to evaluate {candidate.describe()}: {'; '.join(problems)}. "
            f"{left_out}. Log more decisions with exploration (ε > 0), or evaluate a candidate closer to "
            f"the logged policy."
        )


def candidate_learner(
    candidate: Candidate, base: LearnerConfig, tools: list[ToolDoc], embedder: Embedder | None
) -> Learner:
    """A fresh learner for the candidate: the running learner's configuration (reward weights, encoder,
    capabilities) with the candidate's policy."""
    config = replace(base, policy=candidate.policy, policy_config=candidate.policy_config())
    return Learner(config, tools, embedder)


class OffPolicyReplay:
    """Walks a log in order (fed one execution at a time: no I/O here) and collects what `estimate`
    needs. `warm` is the frozen protocol's first part; `step` evaluates (and, learning, learns)."""

    def __init__(
        self, learner: Learner, candidate: Candidate, rng: np.random.Generator, rule: SupportRule | None = None
    ) -> None:
        self.learner = learner
        self.candidate = candidate
        self.rng = rng
        self.rule = rule or SupportRule()
        self.model = DiagonalRidge(RidgeConfig(dim=learner.config.encoder.dim))
        self.counts = Counts()
        self.sums = Sums()
        low, high = learner.config.reward.bounds
        self._low, self._span = low, high - low

    def warm(self, logged: Logged) -> None:
        """Frozen protocol: learn an execution of the first part of the log, whatever chose it."""
        self.counts.executions += 1
        self.counts.warm_up += 1
        if logged.reward is not None:
            self.learner.learn(logged.step, self.rng, reward=logged.reward)
            self._fit(logged, logged.reward)

    def step(self, logged: Logged) -> None:
        """Evaluate one execution: a usable decision is replayed through the candidate; a call that
        followed no decision is learned by a learning candidate (it would have seen it too)."""
        c = self.counts
        c.executions += 1
        if not logged.decision:
            if self.candidate.learning and logged.reward is not None:
                self.learner.learn(logged.step, self.rng, reward=logged.reward)
            return
        c.decisions += 1
        if logged.propensity is None:
            c.no_propensity += 1
        elif logged.propensity < self.rule.min_propensity:
            c.tiny_propensity += 1
        elif logged.reward is None:
            c.no_reward += 1
        else:
            self._evaluate(logged, logged.propensity, logged.reward)

    def _evaluate(self, logged: Logged, propensity: float, reward: float) -> None:
        learner = self.learner
        decision = learner.recommend(
            logged.step.query,
            self.rng,
            previous_tool=logged.step.previous_tool,
            position=logged.step.position,
            top_k=1,
        )
        match = decision.chosen == logged.step.tool
        q_logged, q_candidate = self._predict(logged, logged.step.tool), self._predict(logged, decision.chosen)
        self.sums.add(reward, propensity, 1.0 if match else 0.0, q_logged, q_candidate)
        self.counts.evaluated += 1
        self.counts.unsupported += not match and propensity > 1 - self.rule.min_propensity
        if match and self.candidate.learning:
            learner.learn(logged.step, self.rng, reward=reward)
        self._fit(logged, reward)

    def _predict(self, logged: Logged, tool: str) -> float:
        """q̂(x, tool) in reward units, from the decisions before this one."""
        arm = self.learner.index.tools.intern(tool)
        context = self.learner.config.encoder.encode(logged.step.query, logged.step.previous_tool, logged.step.position)
        prior = self.learner.features.prior_of(logged.step.query, logged.step.previous_tool, arm)
        mean = self.model.mean_and_width(context, np.array([arm]), np.array([prior]))[0][0]
        return self._low + self._span * min(1.0, max(0.0, float(mean)))

    def _fit(self, logged: Logged, reward: float) -> None:
        arm = self.learner.index.tools.intern(logged.step.tool)
        context = self.learner.config.encoder.encode(logged.step.query, logged.step.previous_tool, logged.step.position)
        prior = self.learner.features.prior_of(logged.step.query, logged.step.previous_tool, arm)
        self.model.update(context, arm, (reward - self._low) / self._span, prior)

    def result(self, confidence: float = 0.95) -> Evaluation:
        """The estimates, or ThinSupportError naming the numbers where the log cannot support them."""
        if not self.sums.n:
            c = self.counts
            raise ThinSupportError(
                f"no logged decision to evaluate {self.candidate.describe()} on: {c.executions} executions read, "
                f"{c.decisions} followed a recommendation, {c.no_propensity} of them without a propensity, "
                f"{c.tiny_propensity} with one below {self.rule.min_propensity:g}, {c.no_reward} without a reward"
            )
        estimates = estimate_sums(self.sums, confidence)
        check_support(estimates, self.counts, self.rule, self.candidate)
        return Evaluation(self.candidate, estimates, self.counts, self.rule)
