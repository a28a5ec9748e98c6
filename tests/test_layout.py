"""The packages import in one direction only (README, Layout): a module never imports from a package
listed after its own, so each layer can be read, tested and reused without the ones above it."""

from __future__ import annotations

import ast
from pathlib import Path

import toolwise

SRC = Path(toolwise.__file__).parent
LAYERS = ["lazy", "errors", "rl", "feedback", "sdk", "background", "config", "downstream", "learning", "server", "cli"]
SHIMS = {SRC / "server" / "__main__.py", SRC / "__main__.py"}  # launchers of the CLI, nothing imports them


def is_module(name: str) -> bool:
    return (SRC / f"{name}.py").exists()


def imports(path: Path) -> list[tuple[int, str]]:
    """The toolwise packages a module imports from (at any depth: lazy imports count too); a name of the root
    package itself (`__version__`: its `__init__` imports nothing) is below every layer."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("toolwise."):
            found.append((node.lineno, node.module.split(".")[1]))
        elif isinstance(node, ast.ImportFrom) and node.module == "toolwise":  # a package, or the root's own name
            found.extend((node.lineno, a.name) for a in node.names if (SRC / a.name).is_dir() or is_module(a.name))
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


def test_no_module_assigns_the_fields_of_an_object_it_holds_of_another_module() -> None:
    """`self.part.field = value` is for a part whose class the module defines (its own record); the
    fields of another module's object are set through that object's methods, so each piece of state
    has one owner (a restore swaps the learned state whole, it does not assign it field by field)."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        own_classes = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        own_parts = {  # self.part = OwnClass(...)
            t.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
            if n.value.func.id in own_classes
            for t in n.targets
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            for target in targets:
                part = target.value if isinstance(target, ast.Attribute) else None
                if (
                    isinstance(part, ast.Attribute)
                    and isinstance(part.value, ast.Name)
                    and part.value.id == "self"
                    and part.attr not in own_parts
                ):
                    found.append(f"{path.relative_to(SRC)}:{node.lineno}: {ast.unparse(target)}")
    assert not found, "fields of another module's object assigned:\n" + "\n".join(found)


def module_imports() -> dict[str, set[str]]:
    """Each toolwise module and the toolwise modules it imports (type-only imports too), by dotted name."""
    names = {
        ".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in SRC.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in names:
                found |= {
                    f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in names else node.module for a in node.names
                }
        graph[name] = {m for m in found if m != "toolwise" and not name.startswith(m + ".")}  # not its own package
    return graph


def test_no_module_imports_one_that_imports_it_back() -> None:
    """A circle (even through `TYPE_CHECKING`) means neither module can be read or tested without the
    other: a store takes the small handle it uses (feedback/database.py), not the service that owns it."""
    graph = module_imports()
    circles = []
    for start in sorted(graph):
        seen, path = {start}, [start]
        stack = [iter(sorted(graph[start]))]
        while stack:  # depth first from `start`, reporting a way back to it
            following = next(stack[-1], None)
            if following is None:
                stack.pop()
                path.pop()
            elif following == start:
                circles.append(" → ".join([*path, start]))
                break
            elif following not in seen:
                seen.add(following)
                path.append(following)
                stack.append(iter(sorted(graph.get(following, ()))))
    assert not circles, "import circles:\n" + "\n".join(circles)
