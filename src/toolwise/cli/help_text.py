"""The commands' --help as a user reads it. typer writes a required argument in the usage line as
`{files}...`, a list's type as `<list[Path]>` and a flag's as `<bool>`, which reads as a value to give
(`--wide true` is refused); here an argument is FILES... (its name in capitals, [NAME] when optional) and a
flag shows no type. A description's paragraphs are reflowed to the terminal's width (typer's rich mode keeps
a docstring's line breaks).

Through click's API, which typer's commands and parameters keep (typer 0.29 vendors click: a command's
`collect_usage_pieces` and `get_params`, a parameter's `name`, `nargs`, `required`, `is_flag` and
`metavar`), and typer's documented `cls` and `metavar` (an argument's metavar names it in the table, an
option's is shown in place of its type). Except a list argument's type: typer shows an argument's type
from its annotation whatever its metavar, so `_ListArgument` answers typer's `display_type_rich` for it,
the one method of typer's own used here (pyproject pins typer to the versions that have it;
tests/cli/test_help.py pins the output)."""

from __future__ import annotations

import inspect
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup


class _ListArgument(TyperArgument):
    """An argument taking several values, its type shown as one value's (FILES... <path>)."""

    def display_type_rich(self, ctx: Any) -> str | None:
        shown = super().display_type_rich(ctx)
        if shown is None or not shown.startswith("<list["):
            return shown
        return "<" + shown.removeprefix("<list[").removesuffix("]>").lower() + ">"


def _is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", None) == "argument"


def _name(param: Any) -> str:
    """An argument as the usage line and the help's table name it: FILES... for several."""
    return (param.name or "").upper() + ("..." if param.nargs != 1 else "")


def _reflowed(text: str | None) -> str | None:
    """Each paragraph of a command's docstring on one line, for rich to wrap at the terminal's width: its
    breaks, kept, left a ragged line ("and") wherever the terminal was narrower than the source."""
    if text is None:
        return None
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(text).split("\n\n"))


class _Plain:
    """Mixed into a command or group: its description reflowed, its parameters shown as above."""

    help: str | None
    options_metavar: str | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _reflowed(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        params: list[Any] = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if param.metavar is not None:
                continue  # set where it is declared, or already here
            if _is_argument(param):
                param.metavar = _name(param)
                if param.nargs != 1 and type(param) is TyperArgument:
                    param.__class__ = _ListArgument
            elif getattr(param, "is_flag", False):
                param.metavar = ""  # shown in place of the type: none
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line's words after the command: [OPTIONS], each argument as FILES... (or [NAME] when
        optional), and a group's COMMAND [ARGS]..."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if _is_argument(param):
                pieces.append(_name(param) if param.required else f"[{_name(param)}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        if isinstance(self, TyperGroup):
            pieces.append(self.subcommand_metavar)
        return pieces


class _Command(_Plain, TyperCommand):
    pass


class _Group(_Plain, TyperGroup):
    pass


def plain_help(app: typer.Typer) -> None:
    """Every command and group of `app` (its sub-apps' too) shows its help as above."""
    if not isinstance(app.info.cls, type) or app.info.cls is TyperGroup:  # typer's (unset: a placeholder)
        app.info.cls = _Group
    for command in app.registered_commands:
        if not isinstance(command.cls, type) or command.cls is TyperCommand:
            command.cls = _Command
    for group in app.registered_groups:
        if group.typer_instance is not None:
            plain_help(group.typer_instance)
