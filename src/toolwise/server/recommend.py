"""recommend_tool and recommend_next_tools: what the agent may call (next), with the figures that say why."""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from toolwise.downstream.naming import meant_name
from toolwise.learning.sessions import Session
from toolwise.rl import Decision, Ranked, UnknownToolError
from toolwise.server.own import SESSION_FIELD, Input, Output
from toolwise.server.services import Services

# -- recommend_tool ---------------------------------------------------------------------------------


class RecommendToolInput(Input):
    query: str = Field(min_length=1, description="the task, in words")
    top_k: int = Field(default=5, ge=1, le=50)
    candidates: list[str] | None = Field(default=None, description="only these tools")
    session_id: str | None = SESSION_FIELD


class Recommendation(BaseModel):
    tool: str
    score: float = Field(
        description="The policy's ranking score (expected reward plus exploration); the largest finite number "
        "for a tool `ucb` has never tried here (its infinite optimism)."
    )
    confidence: float = Field(
        description="In 0..1, from what was learned: the probability that a call of this tool works for this "
        "request (the default policy, `outcome`: calibrated on the outcomes seen), the probability this is the "
        "tool the agent wants (policy `choice`), or the expected normalised reward (the reward-learning policies)."
    )
    p_agent: float | None = Field(
        default=None, description="The probability the agent calls this tool here (what the choice model learned)."
    )
    evidence: float | None = Field(
        default=None, description="The calls (similarity-weighted) `confidence` rests on; 0: the prior alone."
    )
    relevance: float = Field(description="Lexical/sequence relevance to the query in 0..1 (the prior).")
    reason: str
    explored: bool
    arguments: dict[str, Any] = Field(
        default_factory=dict,
        description="Argument values successful calls of this tool used for similar requests (with "
        "store_arguments on; secrets never): a starting point, not a guess at every parameter.",
    )


class RecommendToolOutput(Output):
    decision_id: str
    context_hash: str
    policy: str
    explored: bool
    propensity: float
    session_id: str
    nothing_fits: bool = Field(
        default=False,
        description="No tool seems to serve this request (the best relevance is low: rl/fit.py); the "
        "recommendations are best guesses.",
    )
    recommendations: list[Recommendation]

    def text(self) -> str:
        lines = [nothing_fits_line(self.recommendations[0].tool)] if self.nothing_fits and self.recommendations else []
        lines.append(f"Recommended ({self.policy}, decision {self.decision_id}):")
        for i, r in enumerate(self.recommendations, 1):
            lines.append(f"{i}. {r.tool} — {r.reason}")
            if r.arguments:
                lines.append("   worked before: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in r.arguments.items()))
        return "\n".join(lines)


def nothing_fits_line(best: str) -> str:
    """The first line of an answer whose decision says no tool fits (recommend_tool, search_tools)."""
    return f"No tool seems to fit this request; best guess: {best}."


SUGGESTED = 3  # recommendations that carry argument suggestions (each looks through its tool's memory)
PRIOR_CALLS = 20  # learned calls the reported probability's uniform start counts as


@dataclass(frozen=True, slots=True)
class Evidence:
    """What a reported probability rests on: calls learned (learner updates) and tools to choose from."""

    calls: int
    choices: int


def evidence_of(services: Services, decision: Decision, candidates: list[str] | None) -> Evidence:
    """The calls the decision's own learner had learned (a restore may have replaced it since), the tools."""
    choices = len(set(candidates)) if candidates else len(services.learning.learner.index.active)
    return Evidence(decision.learned, choices)


def confidence_of(policy: str, expected: float, evidence: Evidence) -> float:
    """The confidence reported of a tool whose estimate under `policy` is `expected`, in 0..1 (recommend_tool's,
    and `toolwise inspect qvalues`'). The choice model's softmax over the prior's text scores says 0.9 before a
    call was learned (its weights set the scale, not the data), so its probability is shrunk toward uniform over
    the choices by the evidence: n/(n + PRIOR_CALLS) of it after n learned calls."""
    expected = min(1.0, max(0.0, expected))
    if policy != "choice":  # outcome: P(works), already shrunk to its prior by its evidence
        return expected
    n, uniform = evidence.calls, 1.0 / max(evidence.choices, 1)
    return (n * expected + PRIOR_CALLS * uniform) / (n + PRIOR_CALLS)


def reported_score(score: float) -> float:
    """A ranking score as JSON can carry it: UCB scores a tool never tried in a context +inf, which JSON
    writes as null and a client checking the output schema (a number) refused the whole answer."""
    return score if math.isfinite(score) else math.copysign(sys.float_info.max, score)


def reason_of(decision: Decision, ranked: Ranked, evidence: Evidence) -> str:
    """Why a tool ranks where it does in a decision (recommend_tool, search_tools)."""
    exploring = " (exploring)" if decision.explored and ranked.tool == decision.chosen else ""
    if ranked.p_agent is not None and ranked.evidence is not None:
        works = f"probability {ranked.expected:.2f} it works"
        basis = f"on {ranked.evidence:.1f} similar calls" if ranked.evidence >= 0.05 else "before any similar call"
        return f"relevance {ranked.prior:.2f}, {works} ({basis}), {ranked.p_agent:.2f} the agent picks it{exploring}"
    if decision.policy == "choice":  # its estimate is the probability that this is the tool wanted
        confidence = confidence_of(decision.policy, ranked.expected, evidence)
        return f"relevance {ranked.prior:.2f}, probability {confidence:.2f} it is the one{exploring}"
    # The estimate is a regression's: it can overshoot the scale it estimates, shown clipped to it.
    expected = min(1.0, max(0.0, ranked.expected))
    return f"relevance {ranked.prior:.2f}, expected reward {expected:.2f} of 1{exploring}"


# -- recommend_next_tools ---------------------------------------------------------------------------


class RecommendNextInput(Input):
    recent_tools: list[str] | None = Field(default=None, description="default: the session's calls")
    last_failed: bool | None = Field(default=None, description="default: whether the session's last call failed")
    top_k: int = Field(default=5, ge=1, le=50)
    session_id: str | None = SESSION_FIELD


class NextRecommendation(BaseModel):
    tool: str
    score: float = Field(description="= p_agent")
    p_agent: float = Field(description="P(the agent calls it next, a retry included)")
    p_works: float = Field(description="P(that call works)")
    count: int
    success_rate: float
    mean_reward: float
    reason: str


class RecommendNextOutput(Output):
    session_id: str
    recent_tools: list[str]
    recommendations: list[NextRecommendation]

    def text(self) -> str:
        if not self.recommendations:
            return "No call has been made yet: nothing to suggest."
        return "\n".join(f"{r.tool}: {r.reason}" for r in self.recommendations)


# -- the handlers: plain functions of the running services, the validated input and the session ------


def known(services: Services, names: list[str], *, served: bool = False) -> None:
    """UnknownToolError unless every name is a tool the learner knows (a past call's may be one its server no
    longer lists); `served`: a tool served now, one its server stopped listing named as such (the learner still
    knows it, and would rank it)."""
    index, gone = services.learning.learner.index, services.catalogue.gone if served else {}
    unknown = sorted({n for n in names if n not in index.tools or n in gone})
    if unknown:
        listed = index.active_names
        meant = {n: name for n in unknown if (name := meant_name(n, listed)) is not None and name != n}
        raise UnknownToolError(unknown, meant, {n: gone[n] for n in unknown if n in gone})


async def recommend_tool(services: Services, args: RecommendToolInput, session: Session) -> RecommendToolOutput:
    if args.candidates is not None:
        known(services, args.candidates, served=True)  # before the learner's own check: with the name each stands for
    d, suggested = await services.agent.recommend_with_arguments(
        session, args.query, args.top_k, args.candidates, suggest=SUGGESTED
    )
    evidence = evidence_of(services, d, args.candidates)
    recs = [
        Recommendation(
            tool=r.tool,
            score=reported_score(r.score),
            confidence=confidence_of(d.policy, r.expected, evidence),
            p_agent=r.p_agent,
            evidence=r.evidence,
            relevance=r.prior,
            reason=reason_of(d, r, evidence),
            explored=d.explored and r.tool == d.chosen,
            arguments={a.name: a.value for a in suggested.get(r.tool, ())},
        )
        for r in d.ranked
    ]
    return RecommendToolOutput(
        decision_id=d.decision_id,
        context_hash=d.context_hash,
        policy=d.policy,
        explored=d.explored,
        propensity=d.propensity,
        session_id=session.name,
        nothing_fits=d.nothing_fits,
        recommendations=recs,
    )


async def recommend_next_tools(services: Services, args: RecommendNextInput, session: Session) -> RecommendNextOutput:
    recent = list(session.tools) if args.recent_tools is None else args.recent_tools  # as now: read beside the loop
    known(services, recent)
    last_failed = args.last_failed
    if last_failed is None:
        last_failed = args.recent_tools is None and bool(session.calls) and not session.calls[-1].success
    blocked = services.agent.shielded(None)  # left out, as recommend_tool leaves them out
    found = await services.learning.read_learned(
        lambda learner: learner.recommend_next(
            recent, [n for n in learner.index.active_names if n not in blocked], args.top_k, after_failure=last_failed
        ),
        midway=True,  # a read of the n-grams alone: it may see a run part-learned (`LearningThread.answer_midway`)
    )
    return RecommendNextOutput(
        session_id=session.name,
        recent_tools=recent,
        recommendations=[NextRecommendation.model_validate(n, from_attributes=True) for n in found],
    )
