"""The policies, one module each, behind the `Policy` protocol; `make_policy` builds one by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolwise.rl.policies.base import Policy, Selection, Update
from toolwise.rl.policies.choice import ChoiceModel
from toolwise.rl.policies.choice_config import ChoiceConfig
from toolwise.rl.policies.linear import LinTS, LinTSConfig, LinUCB, LinUCBConfig
from toolwise.rl.policies.outcome import OutcomeModel, OutcomeModelConfig
from toolwise.rl.policies.ridge import RidgeConfig
from toolwise.rl.policies.semantic import SemanticUCB
from toolwise.rl.policies.semantic_config import SemanticConfig
from toolwise.rl.policies.thompson import TabularThompson, ThompsonConfig
from toolwise.rl.policies.ucb import TabularUCB, UCBConfig

PolicyConfig = (
    UCBConfig | ThompsonConfig | LinUCBConfig | LinTSConfig | SemanticConfig | ChoiceConfig | OutcomeModelConfig
)

POLICIES: dict[str, tuple[Callable[[Any], Policy], type]] = {
    TabularUCB.name: (TabularUCB, UCBConfig),
    TabularThompson.name: (TabularThompson, ThompsonConfig),
    LinUCB.name: (LinUCB, LinUCBConfig),
    LinTS.name: (LinTS, LinTSConfig),
    SemanticUCB.name: (SemanticUCB, SemanticConfig),
    ChoiceModel.name: (ChoiceModel, ChoiceConfig),
    OutcomeModel.name: (OutcomeModel, OutcomeModelConfig),
}


def make_policy(name: str, config: PolicyConfig | None = None) -> Policy:
    """A fresh policy by name, with its default config unless one of the matching type is given."""
    if name not in POLICIES:
        raise ValueError(f"policy must be one of {sorted(POLICIES)}, got {name!r}")
    cls, config_type = POLICIES[name]
    if config is not None and not isinstance(config, config_type):
        raise TypeError(f"policy {name!r} takes a {config_type.__name__}, got {type(config).__name__}")
    return cls(config)


__all__ = [
    "POLICIES",
    "ChoiceConfig",
    "ChoiceModel",
    "LinTS",
    "LinTSConfig",
    "LinUCB",
    "LinUCBConfig",
    "OutcomeModel",
    "OutcomeModelConfig",
    "Policy",
    "PolicyConfig",
    "RidgeConfig",
    "Selection",
    "SemanticConfig",
    "SemanticUCB",
    "TabularThompson",
    "TabularUCB",
    "ThompsonConfig",
    "UCBConfig",
    "Update",
    "make_policy",
]
