"""The commands' --help as a user reads it. typer writes a required argument in the usage line as
`{files}...`, a list's type as `<list[Path]>` and a flag's as `<bool>`, which reads as a value to give
(`--wide true` is refused); here an argument is FILES... (its name in capitals, [NAME] when optional) and a
flag shows no type. A description's paragraphs are reflowed to the terminal's width (typer's rich mode keeps
a docstring's line breaks)."""

from __future__ import annotations

import inspect
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


class _Argument(TyperArgument):
    @property
    def display_name_raw(self) -> str:
        return self.metavar or (self.name or "").upper()

    def get_usage_pieces(self, ctx: Any) -> list[str]:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return [name + ("..." if self.nargs != 1 else "")]

    def display_type_rich(self, ctx: Any) -> str | None:
        desc = self.type_descriptor
        if desc.is_list:  # FILES... says there may be several: the type of one
            return f"<{desc.path_type}>" if desc.path_type else None
        return super().display_type_rich(ctx)


class _Option(TyperOption):
    def display_type_rich(self, ctx: Any) -> str | None:
        return None if self.is_flag else super().display_type_rich(ctx)


def _plain(params: list[Any]) -> list[Any]:
    """The same parameters, shown as above (their class swapped for one that only displays otherwise)."""
    for param in params:
        if type(param) is TyperArgument:
            param.__class__ = _Argument
        elif type(param) is TyperOption:
            param.__class__ = _Option
    return params


def _reflowed(text: str | None) -> str | None:
    """Each paragraph of a command's docstring on one line, for rich to wrap at the terminal's width: its
    breaks, kept, left a ragged line ("and") wherever the terminal was narrower than the source."""
    if text is None:
        return None
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(text).split("\n\n"))


class _Plain:
    """Mixed into a command or group: its description reflowed, its parameters shown as above."""

    help: str | None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.help = _reflowed(self.help)

    def get_params(self, ctx: Any) -> list[Any]:
        return _plain(super().get_params(ctx))  # type: ignore[misc]


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
