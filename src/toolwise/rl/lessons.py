"""A step as the policy is taught it (`Lesson`): the call as a choice among the catalogue or against its
prior, its fit read in hindsight from what came next (rl/hindsight.py), how well it went, and the
context it led to."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolwise.rl.context import Context
from toolwise.rl.features import Features
from toolwise.rl.hindsight import reading
from toolwise.rl.policies.base import Lesson, Policy
from toolwise.rl.steps import Step
from toolwise.rl.toolindex import ToolIndex


class Lessons:
    def __init__(
        self,
        index: ToolIndex,
        features: Features,
        policy: Policy,
        encode: Callable[[str | None, str | None, int], Context],
    ) -> None:
        self.index = index
        self.features = features
        self.policy = policy
        self.encode = encode

    def of(
        self,
        step: Step,
        scaled: float,
        context: Context,
        next_tool: str | None,
        *,
        fit_before: float | None,
        revision: bool,
    ) -> Lesson:
        """What the policy learns of `step` (its reward `scaled` to [0, 1]), given what it declares it reads
        (`Capabilities`), a failure read in hindsight from `next_tool`. A `revision` (a rating) changes the
        fit counted for the step from `fit_before` (None: none was counted, none is)."""
        capabilities = self.policy.capabilities
        arm = self.index.tools.intern(step.tool)
        ok, fit = reading(step, next_tool)
        if revision and fit_before is None:
            fit = None
        candidates = rows = over = None
        prior = 0.0
        if capabilities.candidates:  # the call as a choice among the catalogue (rl/policies/choice.py)
            active = self.index.active
            candidates = active if arm in active else np.append(active, arm)
            history = tuple(step.history) or ((step.previous_tool,) if step.previous_tool else ())
            rows = self.features.choice_rows(step.query, history, candidates)
            over = self.index.tools.get(step.passed_over) if step.passed_over else None
        else:
            prior = self.features.prior_of(step.query, step.previous_tool, arm)
        future = capabilities.next_context and not step.terminal
        return Lesson(
            context,
            arm,
            scaled,
            ok,
            weight=0.5 + 0.5 * (scaled if ok else 1 - scaled),  # how well it went: reward, or its shortfall
            prior=prior,
            next_context=self.encode(step.query, step.tool, step.position + 1) if future else None,
            candidates=candidates,
            rows=rows,
            passed_over=over,
            fit=fit,
            fit_before=fit_before if revision else None,
            followed=step.followed and not revision,
        )
