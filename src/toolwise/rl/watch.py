"""What each call's outcome says of its tool beyond the policy's own learning: the adaptive ε and the drift
guard are fed, a tool whose rewards changed is forgotten by the policy and re-opened for exploration, and a
policy that reads health learns which tools are broken now."""

from __future__ import annotations

from toolwise.rl.exploration import Drift, Exploration
from toolwise.rl.policies.base import Policy
from toolwise.rl.toolindex import ToolIndex

HEALTHY = 0.5  # a tool that broke counts as working again once half its recent calls work


class DriftWatch:
    def __init__(self, exploration: Exploration, index: ToolIndex, policy: Policy) -> None:
        self.exploration = exploration
        self.index = index
        self.policy = policy

    def watch(self, tool: str, normalised: float, ok: bool, updates: int) -> Drift | None:
        """Feed the adaptive ε and the drift guard (the learner at `updates`); a tool whose rewards changed
        is forgotten by the policy (its old evidence no longer describes it) and re-opened for exploration."""
        drift = self.exploration.observe(tool, normalised, ok, updates)
        arm = self.index.tools.get(tool)
        if arm is None:
            return drift
        if drift is not None:
            self.policy.forget(arm)
        if self.policy.capabilities.health and (drift is not None or arm in self.policy.health):
            recent = self.exploration.last[tool]  # the share of its last ~10 calls that worked
            if drift is not None:  # it just broke (taken as broken until it shows it works) or recovered
                self.policy.set_health(arm, 0.0 if drift.direction == "fell" else None)
            else:
                self.policy.set_health(arm, recent if recent < HEALTHY else None)
        return drift
