"""How to learn: rewards, contexts, policies, replay and tool sequences. Pure computation: no I/O,
no clock, no global random state (every decision takes a `numpy.random.Generator`)."""

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
