"""The packages import in one direction only (README, Layout): a module never imports from a package
listed after its own, so each layer can be read, tested and reused without the ones above it."""

from __future__ import annotations

import ast
from pathlib import Path

import toolwise

SRC = Path(toolwise.__file__).parent
LAYERS = ["rl", "feedback", "sdk", "background", "config", "downstream", "learning", "server", "cli"]
SHIMS = {SRC / "server" / "__main__.py", SRC / "__main__.py"}  # launchers of the CLI, nothing imports them


def imports(path: Path) -> list[tuple[int, str]]:
    """The toolwise packages a module imports from (at any depth: lazy imports count too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolwise."):
            found.append((node.lineno, node.module.split(".")[1]))
        elif isinstance(node, ast.ImportFrom) and node.module == "toolwise":
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


def test_every_module_imports_only_from_its_own_package_or_those_below() -> None:
    upward = []
    for path in sorted(SRC.rglob("*.py")):
        if path in SHIMS or (path.parent == SRC and path.stem == "__init__"):
            continue
        own = path.relative_to(SRC).parts[0].removesuffix(".py")
        assert own in LAYERS, f"{path}: a package the layering does not name"
        for line, other in imports(path):
            assert other in LAYERS, f"{path}:{line}: imports toolwise.{other}, which the layering does not name"
            if LAYERS.index(other) > LAYERS.index(own):
                upward.append(f"{path.relative_to(SRC)}:{line} imports toolwise.{other}")
    assert not upward, "imports against the layering:\n" + "\n".join(upward)
