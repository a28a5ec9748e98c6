"""How to learn: rewards, contexts, policies, replay and tool sequences. Pure computation: no I/O,
no clock, no global random state (every decision takes a `numpy.random.Generator`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported on first use (toolwise/lazy.py): the package's light modules stay light
    from toolwise.rl.context import Context, ContextEncoder
    from toolwise.rl.decisions import Decision, Ranked
    from toolwise.rl.learner import Learner, LearnerConfig, Observation
    from toolwise.rl.lexical import LexicalIndex
    from toolwise.rl.policies import POLICIES, make_policy
    from toolwise.rl.replay import PrioritizedReplay, SumTree, Transition
    from toolwise.rl.reward import RewardWeights, compute_reward, normalise
    from toolwise.rl.sequences import NextTool, SequenceModel
    from toolwise.rl.steps import Step, StepColumns
    from toolwise.rl.toolindex import ToolDoc, ToolIndex, UnknownToolError
else:
    from toolwise.lazy import lazy_exports

    __getattr__ = lazy_exports(
        __name__,
        {
            "context": ("Context", "ContextEncoder"),
            "decisions": ("Decision", "Ranked"),
            "learner": ("Learner", "LearnerConfig", "Observation"),
            "lexical": ("LexicalIndex",),
            "policies": ("POLICIES", "make_policy"),
            "replay": ("PrioritizedReplay", "SumTree", "Transition"),
            "reward": ("RewardWeights", "compute_reward", "normalise"),
            "sequences": ("NextTool", "SequenceModel"),
            "steps": ("Step", "StepColumns"),
            "toolindex": ("ToolDoc", "ToolIndex", "UnknownToolError"),
        },
    )

__all__ = [
    "POLICIES",
    "Context",
    "ContextEncoder",
    "Decision",
    "Learner",
    "LearnerConfig",
    "LexicalIndex",
    "NextTool",
    "Observation",
    "PrioritizedReplay",
    "Ranked",
    "RewardWeights",
    "SequenceModel",
    "Step",
    "StepColumns",
    "SumTree",
    "ToolDoc",
    "ToolIndex",
    "Transition",
    "UnknownToolError",
    "compute_reward",
    "make_policy",
    "normalise",
]
