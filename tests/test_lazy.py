"""The packages that export their names on first use (toolwise/lazy.py) list each name twice: for the type
checker (under TYPE_CHECKING) and for the run (`lazy_exports`). A name the type checker sees that the run
lacks would pass mypy and fail at the first use; this keeps the two lists one."""

from __future__ import annotations

import ast
import importlib
import inspect

import pytest

PACKAGES = ["toolwise.feedback", "toolwise.rl"]


def checked_names(package: str) -> dict[str, str]:
    """Each name the package imports under `if TYPE_CHECKING:`, with the module it comes from."""
    tree = ast.parse(inspect.getsource(importlib.import_module(package)))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    return {
        alias.asname or alias.name: node.module or ""
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_the_type_checker_sees_is_there_at_run_time(package: str) -> None:
    names = checked_names(package)
    assert names, f"{package} lists no names under TYPE_CHECKING"
    module = importlib.import_module(package)
    for name, home in names.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


@pytest.mark.parametrize("package", PACKAGES)
def test_a_name_the_package_does_not_export_is_an_attribute_error(package: str) -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        importlib.import_module(package).no_such_name  # noqa: B018 - the lookup is the test
