"""`toolwise --help` and each group's: a command's line in the list is its docstring's first paragraph,
printed with its line breaks as they are (typer's rich mode), so that paragraph is one line."""

from __future__ import annotations

import inspect
import json
import re
from itertools import pairwise
from pathlib import Path

import typer
from typer.testing import CliRunner

from toolwise.cli.main import app
from toolwise.rl import POLICIES


def summaries(group: typer.Typer, prefix: str = "") -> dict[str, str]:
    found = {}
    for command in group.registered_commands:
        assert command.callback is not None
        name = prefix + (command.name or command.callback.__name__)
        found[name] = inspect.cleandoc(command.callback.__doc__ or "").split("\n\n")[0]
    for sub in group.registered_groups:
        assert sub.typer_instance is not None
        found |= summaries(sub.typer_instance, f"{prefix}{sub.name} ")
    return found


def test_each_command_is_summed_up_in_one_line_that_the_help_list_wraps_whole() -> None:
    found = summaries(app)
    assert {"serve", "install", "inspect evaluate", "snapshot restore"} <= set(found)
    broken = {name: summary for name, summary in found.items() if "\n" in summary or not summary}
    assert not broken, broken


def test_an_unknown_log_level_is_refused_naming_the_levels_not_a_traceback(home: Path) -> None:
    """`toolwise serve --log-level verbose` ended in a traceback (`ValueError: Unknown level: 'VERBOSE'`)."""
    for command in (["serve"], ["dashboard"]):
        result = CliRunner().invoke(app, [*command, "--log-level", "verbose"])
        said = " ".join(result.output.replace("│", " ").split())  # typer's error box, unwrapped
        assert result.exit_code == 2 and "Traceback" not in said, result.output
        assert "'verbose' is not one of 'debug', 'info', 'warning', 'error'" in said, said


def test_inspect_evaluate_names_every_policy_it_takes() -> None:
    """Its help named five policies (ucb, thompson, linucb, lints, semantic): not `outcome`, the default,
    nor `choice`, which it evaluates as well (docs/evaluation.md)."""
    result = CliRunner().invoke(app, ["inspect", "evaluate", "--help"], env={"COLUMNS": "300"})
    said = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 0, result.output
    missing = [name for name in POLICIES if name not in said]
    assert not missing, f"policies its help leaves out: {missing}\n{said}"


def test_a_list_setting_from_the_environment_not_in_json_is_one_line_not_a_traceback(home: Path) -> None:
    """A command without a config reads its settings from the environment alone: `TOOLWISE_HTTP_ALLOWED_HOSTS=a.example`
    was pydantic-settings' SettingsError and its traceback."""
    url = f"sqlite+aiosqlite:///{home / 'none.db'}"
    env = {"TOOLWISE_HTTP_ALLOWED_HOSTS": "a.example"}
    result = CliRunner().invoke(app, ["inspect", "status", "--database-url", url], env=env)
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "TOOLWISE_HTTP_ALLOWED_HOSTS: not JSON" in said, said


def every_help(group: typer.Typer, path: list[str], columns: int = 250) -> dict[str, str]:
    """The --help of every command and group under `path`, unwrapped (by default a wide console: one line a row)."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    found = {" ".join(path): result.output}
    for command in group.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.replace("_", "-")
        said = CliRunner().invoke(app, [*path, name, "--help"], env={"COLUMNS": str(columns)})
        assert said.exit_code == 0, said.output
        found[" ".join([*path, name])] = said.output
    for sub in group.registered_groups:
        assert sub.typer_instance is not None and sub.name is not None
        found |= every_help(sub.typer_instance, [*path, sub.name], columns)
    return found


def test_no_help_shows_a_braced_argument_or_a_python_type_for_a_flag_or_a_list() -> None:
    """typer wrote `Usage: toolwise import-dead-letters [OPTIONS] {files}...`, `{ns1} {ns2}`, `{policy}`, a
    list argument's type as `<list[Path]>`, and `--wide <bool>`, which reads as taking a value (`--wide true`
    is refused)."""
    helps = every_help(app, [])
    assert len(helps) > 20
    shown = {name: text for name, text in helps.items() if re.search(r"[{}]|<bool>|<list\[", text)}
    assert not shown, {
        name: [line.strip() for line in text.splitlines() if re.search(r"[{}]|<bool>|<list\[", line)]
        for name, text in shown.items()
    }
    usage = {
        name: next(line.split("Usage: ")[1].strip() for line in text.splitlines() if "Usage: " in line)
        for name, text in helps.items()
    }
    assert usage["import-dead-letters"] == "toolwise import-dead-letters [OPTIONS] FILES..."
    assert usage["inspect compare"] == "toolwise inspect compare [OPTIONS] NS1 NS2"
    assert usage["inspect evaluate"] == "toolwise inspect evaluate [OPTIONS] POLICY"
    assert "* FILES... <path> Dead-letter files" in " ".join(helps["import-dead-letters"].split())
    assert re.search(r"--wide +Full tool names", helps["inspect compare"])  # a flag: no type, no value


def test_every_commands_description_fills_the_width_it_is_shown_at() -> None:
    """`import-dead-letters --help` kept its docstring's line breaks: at 100 columns a line "and" stood
    alone. A paragraph's line ends only where its next word would not fit."""
    for columns in (80, 100):
        ragged: dict[str, list[str]] = {}
        for name, text in every_help(app, [], columns).items():
            description = text.split("Usage: ", 1)[1].split("╭", 1)[0].splitlines()[1:]
            for line, after in pairwise(description):
                if line.strip() and after.strip() and len(line.rstrip()) + 1 + len(after.split()[0]) <= columns - 1:
                    ragged.setdefault(name, []).append(line.strip())
        assert not ragged, (columns, ragged)


def test_a_window_of_no_time_is_refused_not_reported_as_empty() -> None:
    """`inspect progress --hours -1` answered "no executions in the last -1 h", exit 0."""
    for args in (["inspect", "progress", "--hours", "-1"], ["inspect", "plot", "-o", "p.png", "--hours", "0"]):
        result = CliRunner().invoke(app, [*args, "--database-url", "sqlite+aiosqlite:///nowhere.db"])
        assert result.exit_code == 2 and "Invalid value for '--hours'" in result.output, result.output


def test_the_readmes_debug_flag_runs_as_written_and_shows_the_traceback(tmp_path: Path) -> None:
    """The README said "`--debug` adds the traceback"; `toolwise serve --debug …`, where a user puts a
    flag, answered "No such option: --debug": it is toolwise's own option, written before the command."""
    readme = " ".join((Path(__file__).parents[2] / "README.md").read_text().split())
    written = re.search(r"`toolwise --debug ([a-z]+) …` adds the traceback", readme)
    assert written is not None, "the README writes --debug where it goes"
    result = CliRunner().invoke(app, ["--debug", written.group(1), "--config", str(tmp_path / "missing.json")])
    assert result.exit_code == 2 and "Traceback" in result.output and "no such file" in result.output, result.output


def test_the_debug_traceback_of_a_broken_config_shows_no_secret_of_the_file(home: Path) -> None:
    """`--debug` prints pydantic's error, which quoted each wrong value whole (`input_value=…`): a token
    written as a number or a list was printed in full, in the output a user pastes into a bug report."""
    token, key = "12345678901234567890123", "ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    path = home / "broken.json"
    for servers, settings in (
        ({"gh": {"command": "x", "env": {"GITHUB_TOKEN": [key]}}}, {}),
        ({"r": {"url": "https://h.example/mcp", "headers": {"Authorization": int(token)}}}, {}),
        ({"t": {"command": "x"}}, {"http_token": int(token)}),
    ):
        path.write_text(json.dumps({"mcpServers": servers, "toolwise": settings}))
        result = CliRunner().invoke(app, ["--debug", "serve", "--config", str(path)])
        assert result.exit_code == 2 and "Traceback" in result.output and "invalid config" in result.output
        assert key not in result.output and token not in result.output, result.output


def shown(args: list[str], columns: int = 80) -> list[str]:
    """What `toolwise ARGS --help` prints in a terminal `columns` wide, each line without its trailing blanks."""
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return [line.rstrip() for line in result.output.rstrip("\n").splitlines()]


TOP = """
 Usage: toolwise [OPTIONS] COMMAND [ARGS]...

 An MCP proxy that records every tool execution and learns which tool to call
 next.

╭─ Options ────────────────────────────────────────────────────────────────────╮
│ --debug            Show the traceback of a start-up failure, not only its    │
│                    one line.                                                 │
│ --version          Print toolwise's version and exit.                        │
│ --help             Show this message and exit.                               │
╰──────────────────────────────────────────────────────────────────────────────╯
╭─ Commands ───────────────────────────────────────────────────────────────────╮
│ dashboard            Serve the dashboard of CONFIG's database (or            │
│                      --database-url) at http://HOST:PORT/dashboard.          │
│ serve                Run the toolwise MCP server over the downstream servers │
│                      of CONFIG (default: the installed one).                 │
│ demo                 Run toolwise on CONFIG, drive a scripted agent through  │
│                      a real MCP client, and show what it learned.            │
│ install              Put toolwise in front of the MCP servers of Claude      │
│                      Desktop, Claude Code or Cursor.                         │
│ doctor               Check that every downstream starts and the database     │
│                      opens, and say what to fix.                             │
│ import-dead-letters  Put the executions of dead-letter files back into the   │
│                      database (those already there are skipped).             │
│ snapshot             Dump, restore and list snapshots of the learned state.  │
│ inspect              What toolwise learned, from its database.               │
╰──────────────────────────────────────────────────────────────────────────────╯
"""

INSTALL = """
 Usage: toolwise install [OPTIONS]

 Put toolwise in front of the MCP servers of Claude Desktop, Claude Code or
 Cursor.

 The client's servers move into a toolwise config and the client gets one
 toolwise entry instead; a timestamped backup is kept and --undo restores it.

╭─ Options ────────────────────────────────────────────────────────────────────╮
│ --client         <claude-desktop|claude-code|  The MCP client whose servers  │
│                  cursor>                       toolwise goes in front of; by │
│                                                default the one --path's file │
│                                                belongs to (.mcp.json:        │
│                                                claude-code;                  │
│                                                .cursor/mcp.json: cursor),    │
│                                                else claude-desktop.          │
│ --path           <path>                        The client's config file, if  │
│                                                not where it keeps it (e.g. a │
│                                                .mcp.json).                   │
│ --dry-run                                      Print the diff, write         │
│                                                nothing.                      │
│ --undo                                         Put the client's config back  │
│                                                as it was.                    │
│ --help                                         Show this message and exit.   │
╰──────────────────────────────────────────────────────────────────────────────╯
"""

DEAD_LETTERS = """
 Usage: toolwise import-dead-letters [OPTIONS] FILES...

 Put the executions of dead-letter files back into the database (those already there are skipped).

 toolwise writes a call the database refused (a full disk, a deleted file) to a dead-letter file,
 and names that file in an error; once the database takes records again, this returns them to the
 log.

╭─ Arguments ──────────────────────────────────────────────────────────────────────────────────────╮
│ *    FILES...      <path>  Dead-letter files (JSON Lines) to put back. [required]                │
╰──────────────────────────────────────────────────────────────────────────────────────────────────╯
"""


def test_the_help_a_user_reads_is_pinned_line_for_line() -> None:
    """toolwise's --help, a command's with flags (no type shown) and one with an argument taking several files
    (FILES... and one file's type, in the usage line and the table), as a terminal shows them: the output
    help_text.py shapes, pinned whatever typer's internals become (pyproject pins the typer it was made for)."""
    assert shown([]) == TOP.splitlines()
    assert shown(["install"]) == INSTALL.splitlines()
    dead_letters = shown(["import-dead-letters"], columns=100)
    options = next(n for n, line in enumerate(dead_letters) if line.startswith("╭─ Options "))
    assert dead_letters[:options] == DEAD_LETTERS.splitlines()  # the options name the config's folder, the user's
    compare = shown(["inspect", "compare"])
    assert compare[:9] == [
        "",
        " Usage: toolwise inspect compare [OPTIONS] NS1 NS2",
        "",
        " Two namespaces side by side: calls and mean reward per tool.",
        "",
        "╭─ Arguments " + "─" * 66 + "╮",
        "│ *    NS1      <str>  [required]" + " " * 46 + "│",
        "│ *    NS2      <str>  [required]" + " " * 46 + "│",
        "╰" + "─" * 78 + "╯",
    ]


def test_a_missing_argument_is_named_as_the_usage_line_names_it() -> None:
    result = CliRunner().invoke(app, ["import-dead-letters"], env={"COLUMNS": "80"})
    assert result.exit_code == 2
    assert result.output.startswith("Usage: toolwise import-dead-letters [OPTIONS] FILES...\n"), result.output
    assert "Missing argument 'FILES...'." in result.output, result.output
