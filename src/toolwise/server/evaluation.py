"""`toolwise inspect evaluate` and the `evaluate_policy` admin tool: a candidate configuration's
estimated reward on the logged decisions (rl/evaluation.py), replayed from the log in order."""

from __future__ import annotations

import asyncio
import math
from itertools import islice

import numpy as np
from pydantic import BaseModel, Field, JsonValue

from toolwise.errors import UserError
from toolwise.feedback import FeedbackService
from toolwise.feedback.decisions import DecisionColumns, iter_decision_columns
from toolwise.learning.sessions import Session, step_columns
from toolwise.rl import Learner, ToolDoc
from toolwise.rl.estimators import Interval
from toolwise.rl.evaluation import (
    Candidate,
    Evaluation,
    Logged,
    OffPolicyReplay,
    SupportRule,
    candidate_learner,
)
from toolwise.rl.policies import POLICIES
from toolwise.server.own import Input, Output, OwnTool
from toolwise.server.services import Services

RULE = SupportRule()
SESSIONS_KEPT = 100_000  # sessions whose query the replay remembers for their later calls
METHOD = "normal approximation with the empirical variance (SNIPS: delta method)"


class EvaluateInput(Input):
    # Listed tersely (an admin tool: every turn reads the list); docs/evaluation.md says the rest.
    policy: str = Field(json_schema_extra={"enum": list[JsonValue](sorted(POLICIES))})
    epsilon: float | None = Field(default=None, ge=0, le=1, description="default: the policy's")
    prior_weight: float | None = Field(default=None, ge=0, description="default: the policy's")
    frozen: bool = Field(default=False, description="learn half the log, evaluate the rest without learning")
    train_fraction: float = Field(default=0.5, gt=0, lt=1)
    confidence: float = Field(default=0.95, gt=0, lt=1)
    min_matches: int = Field(default=RULE.min_matches, ge=1)
    min_ess: float = Field(default=RULE.min_ess, ge=1)
    min_propensity: float = Field(default=RULE.min_propensity, gt=0, le=1)
    max_unsupported: float = Field(
        default=RULE.max_unsupported, ge=0, le=1, description="most share of certain decisions it disagrees with"
    )
    seed: int = 0


class Estimate(BaseModel):
    mean_reward: float
    low: float
    high: float
    stderr: float


class EvaluateOutput(Output):
    candidate: str
    namespace: str
    decisions: int = Field(description="Logged decisions evaluated on.")
    matches: int = Field(description="Of them, where the candidate picked the logged tool.")
    effective_sample_size: float
    confidence: float
    interval: str = Field(description="How the intervals are computed.")
    logged: Estimate = Field(description="The logged policy's own mean reward on these decisions.")
    ips: Estimate
    snips: Estimate
    dr: Estimate
    left_out: dict[str, int] = Field(
        description="Executions read and learned first; decisions not evaluated, by reason; evaluated ones the "
        "log cannot support (unsupported)."
    )

    def text(self) -> str:
        rows = [("logged policy", self.logged), ("IPS", self.ips), ("SNIPS", self.snips), ("DR", self.dr)]
        level = f"{self.confidence:.0%}"
        lines = [f"{self.candidate} on {self.decisions} logged decisions of {self.namespace!r}:"]
        lines += [f"  {name:<13} {e.mean_reward:8.3f}  {level} [{e.low:.3f}, {e.high:.3f}]" for name, e in rows]
        lines.append(
            f"  {self.matches} matches, effective sample size {self.effective_sample_size:.1f}; intervals: "
            f"{self.interval}"
        )
        lines += [f"  {line}" for line in self.notes()]
        return "\n".join(lines)

    def notes(self) -> list[str]:
        """What was learned first and which decisions were left out, when any."""
        o = self.left_out
        notes = [f"the candidate learned the first {o['warm_up']} executions first"] if o["warm_up"] else []
        if o["no_propensity"] or o["tiny_propensity"] or o["no_reward"]:
            notes.append(
                f"left out: {o['no_propensity']} decisions without a propensity (another tool called than chosen), "
                f"{o['tiny_propensity']} with a tiny one, {o['no_reward']} without a reward"
            )
        return notes


def _estimate(interval: Interval) -> Estimate:
    finite = [v if math.isfinite(v) else 0.0 for v in (interval.estimate, interval.low, interval.high)]
    return Estimate(mean_reward=finite[0], low=finite[1], high=finite[2], stderr=interval.stderr)


def output_of(evaluation: Evaluation, namespace: str) -> EvaluateOutput:
    e, c = evaluation.estimates, evaluation.counts
    return EvaluateOutput(
        candidate=evaluation.candidate.describe(),
        namespace=namespace,
        decisions=e.n,
        matches=e.matches,
        effective_sample_size=e.ess,
        confidence=e.confidence,
        interval=METHOD,
        logged=_estimate(e.logged),
        ips=_estimate(e.ips),
        snips=_estimate(e.snips),
        dr=_estimate(e.dr),
        left_out={
            "executions": c.executions,
            "warm_up": c.warm_up,
            "no_propensity": c.no_propensity,
            "tiny_propensity": c.tiny_propensity,
            "no_reward": c.no_reward,
            "unsupported": c.unsupported,
        },
    )


async def fresh_learner(services: Services, candidate: Candidate) -> Learner:
    """The candidate's learner over the running catalogue (and every tool the log names)."""
    running = services.learning.learner
    index = running.index
    docs = [
        ToolDoc(name, index.descriptions.get(name, ""), index.documents.get(name, "")) for name in index.active_names
    ]
    known = {d.name for d in docs}
    summary = await services.feedback.reports.action_summary(services.learning.namespace)
    docs += [ToolDoc(a.tool) for a in summary if a.tool not in known]
    if not docs:
        raise UserError(f"no tools known in namespace {services.learning.namespace!r}: nothing to evaluate")
    return candidate_learner(candidate, running.config, docs, index.embedder)


async def evaluate_log(
    feedback: FeedbackService,
    namespace: str,
    learner: Learner,
    candidate: Candidate,
    rule: SupportRule,
    *,
    train_fraction: float = 0.5,
    confidence: float = 0.95,
    seed: int = 0,
) -> Evaluation:
    """Replay the namespace's log through `learner` (fresh, the candidate's) in log order; a frozen
    candidate learns the first `train_fraction` of it first. Each batch is replayed in a worker thread:
    a running server keeps serving meanwhile."""
    replay = OffPolicyReplay(learner, candidate, np.random.default_rng(seed), rule)
    warm_up = 0 if candidate.learning else int(await feedback.reads.count_executions(namespace) * train_fraction)
    queries: dict[str, str] = {}  # a session's query is stored once, on the call that followed it

    def replay_batch(batch: DecisionColumns) -> None:
        rows = range(len(batch))
        steps = step_columns(batch, rows, [()] * len(batch), [session_query(batch, i) for i in rows], 1)
        for i in rows:
            logged = Logged(steps.step(i), batch.reward[i], batch.propensity[i], batch.decision_id[i] is not None)
            if replay.counts.executions < warm_up:
                replay.warm(logged)
            else:
                replay.step(logged)

    def session_query(batch: DecisionColumns, i: int) -> str | None:
        query = batch.query[i]
        if query is None:
            return queries.get(batch.session_id[i])
        queries[batch.session_id[i]] = query
        if len(queries) > SESSIONS_KEPT:  # the oldest sessions' queries go: memory stays bounded
            for session in list(islice(queries, SESSIONS_KEPT // 2)):
                del queries[session]
        return query

    async for batch in iter_decision_columns(feedback.database, namespace=namespace):
        await asyncio.to_thread(replay_batch, batch)
    return replay.result(confidence)


def candidate_of(args: EvaluateInput) -> tuple[Candidate, SupportRule]:
    """The candidate the caller described: a value its policy refuses is the caller's to fix."""
    try:
        candidate = Candidate(args.policy, args.epsilon, args.prior_weight, learning=not args.frozen)
    except ValueError as exc:  # a value out of a policy config's range (rl's configs check themselves)
        raise UserError(str(exc)) from exc
    return candidate, SupportRule(args.min_matches, args.min_ess, args.min_propensity, args.max_unsupported)


async def evaluate_policy(services: Services, args: EvaluateInput, session: Session) -> EvaluateOutput:
    candidate, rule = candidate_of(args)
    namespace = services.learning.namespace
    learner = await fresh_learner(services, candidate)
    evaluation = await evaluate_log(
        services.feedback,
        namespace,
        learner,
        candidate,
        rule,
        train_fraction=args.train_fraction,
        confidence=args.confidence,
        seed=args.seed,
    )
    return output_of(evaluation, namespace)


EVALUATE_TOOL: OwnTool[EvaluateInput, EvaluateOutput] = OwnTool(
    "evaluate_policy",
    "Admin: another policy's estimated reward on the logged decisions, beside the logged one's "
    "(more parameters: docs/evaluation.md).",
    EvaluateInput,
    EvaluateOutput,
    evaluate_policy,
    True,
    admin=True,
    unlisted=("train_fraction", "confidence", "min_matches", "min_ess", "min_propensity", "max_unsupported", "seed"),
)
