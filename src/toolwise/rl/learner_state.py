"""The learner's state as plain data (what a snapshot packs) and back: every part's own state, checked
against the schema and the policy it was learned by."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np

from toolwise.rl.exploration import Exploration
from toolwise.rl.learner_config import LearnerConfig
from toolwise.rl.policies.base import Policy
from toolwise.rl.replay import PrioritizedReplay
from toolwise.rl.reward import Latencies
from toolwise.rl.sequences import SequenceModel
from toolwise.rl.toolindex import ToolIndex
from toolwise.rl.waiting import Waiting

STATE_SCHEMA = 1


class StateParts:
    """The parts of a learner whose state is saved (the learner's own counts are passed in and returned)."""

    def __init__(
        self,
        config: LearnerConfig,
        index: ToolIndex,
        latency: Latencies,
        policy: Policy,
        replay: PrioritizedReplay,
        sequences: SequenceModel,
        exploration: Exploration,
        waiting: Waiting,
    ) -> None:
        self.config = config
        self.index = index
        self.latency = latency
        self.policy = policy
        self.replay = replay
        self.sequences = sequences
        self.exploration = exploration
        self.waiting = waiting

    def state_dict(self, updates: int, reward_sum: float) -> dict[str, Any]:
        latency_mean, latency_count = self.latency.state(len(self.index.tools))
        return {
            "schema": STATE_SCHEMA,
            "config": {"policy": self.config.policy, "reward": asdict(self.config.reward)},
            "tools": list(self.index.tools.names),
            "descriptions": dict(self.index.descriptions),
            "documents": dict(self.index.documents),  # the prior's corpus, tools no longer listed included
            "effects": dict(self.index.effects),  # and what it reads of each tool besides
            "actions": dict(self.index.action_of),
            "active": self.index.active.copy(),
            "latency_mean": latency_mean,
            "latency_count": latency_count,
            "updates": updates,
            "reward_sum": reward_sum,
            "policy": self.policy.state_dict(),
            "replay": self.replay.state_dict(),
            "sequences": self.sequences.state_dict(),
            "exploration": self.exploration.state_dict(),
            "waiting": self.waiting.state(),
        }

    def load_state(self, state: dict[str, Any]) -> tuple[int, float]:
        """Every part loaded from `state`; returns the learner's counts (updates, reward sum)."""
        if state["schema"] != STATE_SCHEMA:
            raise ValueError(f"learner state schema {state['schema']} is not {STATE_SCHEMA}")
        if state["config"]["policy"] != self.config.policy:
            raise ValueError(
                f"state was learned by policy {state['config']['policy']!r}, this learner runs {self.config.policy!r}"
            )
        self.latency.load(state["latency_mean"], state["latency_count"])
        counts = int(state["updates"]), float(state["reward_sum"])
        self.policy.load_state(state["policy"])
        self.replay.load_state(state["replay"])
        self.sequences.load_state(state["sequences"])
        if "exploration" in state:  # states saved before adaptive exploration start it afresh
            self.exploration.load_state(state["exploration"])
        self.waiting.load(state.get("waiting", ()))
        active = np.asarray(state["active"], dtype=np.int64).tolist()
        self.index.restore(
            state["tools"],
            state["descriptions"],
            active,
            state.get("documents", {}),
            effects=state.get("effects", {}),
            actions=state.get("actions", {}),
        )
        self.latency.grow(len(self.index.tools))
        return counts
