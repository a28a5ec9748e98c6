"""Deciding: tools ranked for a request by the policy over the prior and the choice model's features,
explored, with whether nothing fits; and what the policy expects of every tool, for inspection."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from functools import partial

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.context import Context
from toolwise.rl.decisions import Decision, Ranked, decision_id
from toolwise.rl.exploration import Exploration
from toolwise.rl.features import Features
from toolwise.rl.fit import TRIED, FitConfig, all_fail, failed_unfit, nothing_fits, tried_unfit
from toolwise.rl.policies.base import Policy, Selection, baseline_selection
from toolwise.rl.toolindex import ToolIndex

Encode = Callable[[str | None, str | None, int], Context]  # (query, previous tool, position) → its context


class Ranking:
    """The learner's deciding part (`Learner.recommend`, `nothing_fits`, `estimates` are these)."""

    def __init__(
        self,
        index: ToolIndex,
        features: Features,
        policy: Policy,
        exploration: Exploration,
        fit: FitConfig,
        encode: Encode,
    ) -> None:
        self.index = index
        self.features = features
        self.policy = policy
        self.exploration = exploration
        self.fit = fit
        self.encode = encode

    def recommend(
        self,
        query: str | None,
        rng: np.random.Generator,
        *,
        previous_tool: str | None,
        position: int,
        candidates: Iterable[str] | None,
        top_k: int,
        exclude: Collection[str],
        baseline: bool,
        named_first: bool,
        history: Sequence[str],
        tried: Collection[str],
    ) -> Decision:
        """See `Learner.recommend`."""
        if top_k < 1:
            raise ValueError(f"top_k must be ≥ 1, got {top_k}")
        arms = self.index.arms(candidates)
        tools = self.index.tools
        if exclude:
            dropped = [i for name in exclude if (i := tools.get(name)) is not None]
            arms = arms[~np.isin(arms, dropped)]
        if len(arms) == 0:
            raise ValueError("there are no tools to choose from")
        context = self.encode(query, previous_tool, position)
        named = self.index.names.named(query) if named_first and query else []
        # The prior of every tool, where it ranks them; else only the recommendations' is reported (below)
        whole = baseline or bool(named) or not self.policy.capabilities.candidates
        prior_all = self.features.prior(query, previous_tool) if whole else None
        if named and prior_all is not None:
            prior_all = prior_all.copy()  # the prior is read-only (memoised)
            prior_all[named] = 1.0
        if baseline and prior_all is not None:
            selection = baseline_selection(arms, prior_all.take(arms))
        else:
            inputs = self.inputs(query, history or ((previous_tool,) if previous_tool else ()), arms, prior_all)
            if named and self.policy.capabilities.candidates:
                inputs[np.isin(arms, named), :2] = 1.0
            selection = self.policy.select(context, arms, inputs, rng)
        if not baseline:
            selection = self.exploration.explore(selection, arms, top_k, rng, tools)
        names = tools.names
        top = selection.ranked[:top_k]
        prior = prior_all.take(top) if prior_all is not None else self.features.prior_at(query, previous_tool, top)
        ranked = [
            Ranked(names[a], s, e, p)
            for a, s, e, p in zip(
                top.tolist(),
                selection.scores[:top_k].tolist(),
                selection.expected[:top_k].tolist(),
                prior.tolist(),
                strict=True,
            )
        ]
        if selection.agent is not None and selection.evidence is not None:
            for r, agent, evidence in zip(ranked, selection.agent.tolist(), selection.evidence.tolist(), strict=False):
                r.p_agent, r.evidence = agent, evidence
        return Decision(
            decision_id=decision_id(rng),
            policy="baseline" if baseline else self.policy.name,
            context_hash=context.hash,
            chosen=names[selection.chosen],
            ranked=ranked,
            explored=selection.explored,
            propensity=selection.propensity,
            nothing_fits=not named
            and (tried_unfit(tried, self.fit, len(arms)) or self.nothing_fits(query, arms, selection, context)),
        )

    def nothing_fits(self, query: str | None, arms: NDArray[np.int64], selection: Selection, context: Context) -> bool:
        """See `Learner.nothing_fits`."""
        fit = self.fit
        if not fit.enabled:
            return False
        first = selection.ranked[:1]

        def coherence() -> float:
            alike = self.policy.served(context, first)
            return -1.0 if alike is None else float(alike.coherence[0])

        # the best TRIED candidates (the first first): what they served, and what they were seen failing for
        served = self.policy.served(context, selection.ranked[:TRIED], coherence=False) if query else None
        agent = float(selection.agent[0]) if selection.agent is not None and len(selection.agent) else None
        if all_fail(selection):
            return True
        said = nothing_fits(self.index, query, arms, fit, served, coherence, agent)
        crowd = partial(self.policy.failed_near, context, fit.failed.crowd_within)
        p_works = selection.expected if selection.posterior is None else selection.posterior  # FailedFit's fit read it
        return failed_unfit(self.index, query, arms, served, float(p_works[0]), fit.failed, crowd, said)

    def estimates(self, query: str | None, previous_tool: str | None, position: int) -> list[tuple[str, float, float]]:
        """See `Learner.estimates`."""
        context = self.encode(query, previous_tool, position)
        active = self.index.active
        prior_all = self.features.prior(query, previous_tool)
        prior = prior_all.take(active)
        history = (previous_tool,) if previous_tool else ()
        expected = self.policy.expected(context, active, self.inputs(query, history, active, prior_all))
        order = np.argsort(-expected, kind="stable")
        names = self.index.tools.names
        return [(names[active[i]], float(expected[i]), float(prior[i])) for i in order]

    def inputs(
        self, query: str | None, history: Sequence[str], arms: NDArray[np.int64], prior: NDArray[np.float64] | None
    ) -> NDArray[np.float64]:
        """What the policy reads of each of `arms`: their feature rows (`capabilities.candidates`), or
        their relevance in the prior over every tool (`prior`, needed then only)."""
        if self.policy.capabilities.candidates:
            return self.features.choice_rows(query, history, arms)
        if prior is None:
            raise ValueError(f"policy {self.policy.name!r} reads the prior of every tool: none was given")
        return prior.take(arms)
