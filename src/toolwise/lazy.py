"""A package's names imported when first used (PEP 562), not with the package: importing one light module
of `toolwise.feedback` or `toolwise.rl` (a path, a constant, a name list) runs the package's `__init__`,
which would otherwise import SQLAlchemy, numpy and the learner for every command, `toolwise --version`
included, and before `serve` spawns its downstreams."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(package: str, homes: Mapping[str, tuple[str, ...]]) -> Callable[[str], object]:
    """The module `__getattr__` of `package`: a name of `homes` (module → its names) is imported from its
    module on first use and kept in the package; any other name is an AttributeError (so `from package
    import submodule` still imports the submodule)."""
    home_of = {name: module for module, names in homes.items() for name in names}
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> object:
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__
