"""`toolwise demo`: the main job end to end, with no set-up.

Starts toolwise over stdio on a config (the example by default) with a database of its own (`demo.db`
in the data dir, made afresh each run, or the one --database-url names) and a scratch git repository,
then plays an agent through a real MCP client: it asks `recommend_tool`
in varied words, calls what was recommended, rates the result (5 when it was the right tool for
the request, 1 when not), follows up within a session, and ends sessions. Shows what the
recommendations were before and after, how often they were right early and late, and the `inspect`
command that reads what it recorded.

Every figure printed is measured in the run. The same `--seed` prints the same output: the demo
leaves latency out of the rewards and keeps a shielded tool out for the rest of the run, the two
places where the wall clock would otherwise steer what is learned.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from toolwise.cli.doctor import command_found, near_commands
from toolwise.cli.install import toolwise_command
from toolwise.config import AppConfig, StdioServer
from toolwise.feedback import FeedbackService
from toolwise.feedback.engine import data_dir
from toolwise.learning.sessions import session_meta

# Settings the demo lays over the config's so that a seed replays exactly (see the module docstring).
REPLAYABLE = {"shield_retry_s": 1e9}
REPLAYABLE_REWARD = {"latency_per_second": 0.0, "fast_bonus": 0.0}


@dataclass(frozen=True)
class Intent:
    label: str
    phrasings: tuple[str, ...]
    tool: str
    follow_up: str | None = None


INTENTS = (
    Intent(
        "current time",
        ("what time is it in {city}", "current clock in {city}", "{city} time now please"),
        "time__get_current_time",
    ),
    Intent(
        "convert a time",
        (
            "convert 9am {city} to London",
            "if it is 14:00 in {city}, what is it in London",
            "translate a meeting hour from {city} to London",
        ),
        "time__convert_time",
    ),
    Intent(
        "what changed",
        ("what did I change in the repo", "which files are modified", "anything uncommitted in my working tree"),
        "git__git_status",
        "git__git_diff_unstaged",
    ),
    Intent(
        "history", ("show recent commits", "who committed lately", "list the last changes in history"), "git__git_log"
    ),
    Intent(
        "branches", ("which branches exist", "list local branches", "what branch names do we have"), "git__git_branch"
    ),
)
CITIES = ("Tokyo", "Paris", "New York", "Sydney", "Berlin")
ZONES = {
    "Tokyo": "Asia/Tokyo",
    "Paris": "Europe/Paris",
    "New York": "America/New_York",
    "Sydney": "Australia/Sydney",
    "Berlin": "Europe/Berlin",
}


def arguments(tool: str, city: str, repo: Path) -> dict[str, Any]:
    """What the scripted agent passes to each tool (tools it has no recipe for get the repo path)."""
    recipes: dict[str, dict[str, Any]] = {
        "time__get_current_time": {"timezone": ZONES[city]},
        "time__convert_time": {"source_timezone": ZONES[city], "time": "09:00", "target_timezone": "Europe/London"},
        "git__git_log": {"repo_path": str(repo), "max_count": 3},
        "git__git_branch": {"repo_path": str(repo), "branch_type": "local"},
    }
    return recipes.get(tool, {"repo_path": str(repo)})


def scratch_repo(folder: Path) -> Path:
    repo = folder / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q", "-b", "main"],
        ["config", "user.email", "demo@toolwise"],
        ["config", "user.name", "demo"],
    ):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    (repo / "notes.txt").write_text("first\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True, capture_output=True)
    subprocess.run(["git", "commit", "-qm", "start"], cwd=repo, check=True, capture_output=True)
    (repo / "notes.txt").write_text("first\nsecond\n")
    return repo


async def top_pick(client: Client, query: str, session: str) -> str:
    result = await client.call_tool("recommend_tool", {"query": query, "session_id": session, "top_k": 3})
    if result.is_error:
        raise RuntimeError(f"recommend_tool failed: {result.content}")
    return str(result.structured_content["recommendations"][0]["tool"])


def install_hint(packages: list[str]) -> str:
    """How to install the demo's servers where this toolwise finds them. A `uv tool` or `pipx` install of
    toolwise lives in an environment its tool manager owns (uv's has no pip, and an upgrade would drop what
    was added), so the servers become tools of their own, beside `toolwise` on the PATH; else this
    environment's pip."""
    prefix = Path(sys.prefix)
    if (prefix / "uv-receipt.toml").exists():
        return " && ".join(f"uv tool install {package}" for package in packages)
    if (prefix / "pipx_metadata.json").exists():
        return f"pipx install {' '.join(packages)}"
    return f"{sys.executable} -m pip install {' '.join(packages)}"


class DemoError(Exception):
    """The demo cannot run; the message is the one line to show and says what to do."""


def missing_commands(config: AppConfig) -> list[str]:
    return [
        spec.command
        for spec in config.servers.values()
        if isinstance(spec, StdioServer) and not command_found(spec.command)
    ]


@dataclass
class Played:
    """What the scripted agent did, counted as it went: the figures the demo prints."""

    picks: list[bool] = field(default_factory=list)  # the agent's own picks: right first time or not
    follow_ups: int = 0  # scripted calls after a right pick (not picks, never counted as hits)
    ratings: int = 0
    asked: dict[str, int] = field(default_factory=dict)  # intent → requests made
    right: dict[str, int] = field(default_factory=dict)  # intent → right picks

    @property
    def tool_calls(self) -> int:
        return len(self.picks) + self.follow_ups


async def run_demo(config: Path, loaded: AppConfig, calls: int, seed: int, database_url: str | None = None) -> None:
    """Raises DemoError (one line) when a downstream is missing or does not start."""
    missing = missing_commands(loaded)
    if not command_found("git"):
        raise DemoError("git not found on PATH: the demo makes a scratch git repository; install git")
    near = {command: found[0] for command in missing if (found := near_commands(command))}
    if near:  # a misspelt command: never a package to install by that name
        named = ", ".join(f"{command!r} (did you mean {found!r}?)" for command, found in near.items())
        raise DemoError(f'commands not found on PATH: {named}; correct "command" in {config}')
    if missing:
        raise DemoError(
            f"{', '.join(missing)} not installed (the demo's downstream servers); install with: {install_hint(missing)}"
        )
    if database_url is None:  # its own, afresh: the same seed prints the same output
        database_url = f"sqlite+aiosqlite:///{fresh_demo_database()}"
    async with FeedbackService(database_url):  # opened here first: an unusable one is one line, not the server's death
        pass
    console = Console(stderr=False)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="toolwise-demo-") as tmp:
        folder = Path(tmp)
        repo = scratch_repo(folder)
        raw = json.loads(config.read_text())  # noqa: ASYNC240 - a small file, read once at start
        own = raw.get("toolwise", {})
        raw["toolwise"] = {
            **own,
            **REPLAYABLE,
            "reward": {**own.get("reward", {}), **REPLAYABLE_REWARD},
            "database_url": database_url,
            "seed": seed,
        }
        demo_config = folder / "config.json"
        demo_config.write_text(json.dumps(raw))
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolwise", "serve", "-c", str(demo_config), "--log-level", "error"],
        )
        console.print(f"[bold]toolwise demo[/]: {config.name}, {calls} tool calls, seed {seed}, scratch git repo")
        async with contextlib.AsyncExitStack() as stack:
            with console.status("starting toolwise and its downstream servers…"):
                try:
                    client = await stack.enter_async_context(Client(params, read_timeout_seconds=60))
                except Exception as exc:  # whatever stopped it, the toolwise it ran printed why above
                    raise DemoError(
                        f"toolwise did not start ({type(exc).__name__}: {exc}); its message is above"
                    ) from exc
                tools = (await client.list_tools()).tools
            announce(console, loaded, [t.name for t in tools])
            canonical = {i.label: i.phrasings[0].format(city="Paris") for i in INTENTS}
            before = {label: await top_pick(client, q, "probe-before") for label, q in canonical.items()}
            played = await play(client, console, rng, repo, calls)
            after = {label: await top_pick(client, q, "probe-after") for label, q in canonical.items()}
            stats = (await client.call_tool("get_learning_stats", {})).structured_content
            sequences = (await client.call_tool("get_successful_sequences", {"limit": 3})).content
        show(console, before, after, played, stats, sequences)
    # As it runs from any shell (toolwise need not be on its PATH), with the demo's settings (an installed
    # config's namespace would read none of what the demo recorded).
    read_it = ["inspect", "status", "-c", str(config), "--database-url", database_url]
    command = shlex.join([*toolwise_command(), *read_it])
    console.print(
        f"recorded in\n  {database_url.removeprefix('sqlite+aiosqlite:///')}\nread it with\n  {command}\n"
        "(or progress, top-actions, plot --output demo.png)",
        soft_wrap=True,
    )


def fresh_demo_database() -> Path:
    """`demo.db` in toolwise's data dir, emptied: the demo's own database, apart from the one `serve`
    records into, kept after the run for `toolwise inspect --database-url`."""
    path = data_dir() / "demo.db"
    for leftover in (path, path.with_name("demo.db-wal"), path.with_name("demo.db-shm")):
        leftover.unlink(missing_ok=True)
    return path


def announce(console: Console, loaded: AppConfig, names: list[str]) -> None:
    """How many tools toolwise serves, per downstream and of its own: the counts add up."""
    per_server = {server: sum(n.startswith(f"{server}__") for n in names) for server in loaded.servers}
    down = [server for server, n in per_server.items() if n == 0]
    if down:
        raise DemoError(f"downstream {', '.join(down)} did not start; `toolwise doctor -c CONFIG` says why")
    own = [n for n in names if "__" not in n]
    parts = ", ".join(f"{server} {n}" for server, n in per_server.items())
    console.print(f"toolwise serves {len(names)} tools: {len(names) - len(own)} downstream ({parts}) + {len(own)} own")


async def play(client: Client, console: Console, rng: np.random.Generator, repo: Path, calls: int) -> Played:
    played = Played()
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("tool calls", total=calls)
        episode = 0
        while played.tool_calls < calls:
            intent = INTENTS[int(rng.integers(len(INTENTS)))]
            city = CITIES[int(rng.integers(len(CITIES)))]
            query = intent.phrasings[int(rng.integers(len(intent.phrasings)))].format(city=city)
            session = f"demo-{episode}"
            episode += 1
            chosen = await top_pick(client, query, session)
            right = chosen == intent.tool
            await client.call_tool(chosen, arguments(chosen, city, repo), meta=session_meta(session))
            await client.call_tool("submit_feedback", {"rating": 5 if right else 1, "session_id": session})
            played.picks.append(right)
            played.ratings += 1
            played.asked[intent.label] = played.asked.get(intent.label, 0) + 1
            played.right[intent.label] = played.right.get(intent.label, 0) + right
            if right and intent.follow_up and played.tool_calls < calls:
                await client.call_tool(intent.follow_up, {"repo_path": str(repo)}, meta=session_meta(session))
                played.follow_ups += 1
            await client.call_tool("end_session", {"outcome": "success" if right else "failure", "session_id": session})
            progress.update(task, completed=played.tool_calls)
    return played


def show(
    console: Console,
    before: dict[str, str],
    after: dict[str, str],
    played: Played,
    stats: dict[str, Any],
    sequences: list[Any],
) -> None:
    utf = (console.encoding or "").lower().startswith("utf")
    yes, no = ("✓", "✗") if utf else ("ok", "X")

    def mark(tool: str, right: str) -> str:
        # a text mark, not only a colour: it survives a pipe; a wrong pick names what was picked
        return f"[green]{yes}[/]" if tool == right else f"[red]{no} {tool}[/]"

    # Under 100 columns the right tool goes under its request, so no tool name is cut; rich folds
    # whatever still does not fit rather than cutting it.
    wide = console.width >= 100
    table = Table(title="top recommendation for each request")
    for column in ("request", "right tool", "before", "after") if wide else ("request (right tool)", "before", "after"):
        table.add_column(column, overflow="fold")
    for intent in INTENTS:
        request = intent.phrasings[0].format(city="Paris")
        first = [request, intent.tool] if wide else [f"{request}\n[dim]→ {intent.tool}[/]"]
        table.add_row(*first, mark(before[intent.label], intent.tool), mark(after[intent.label], intent.tool))
    console.print(table)
    console.print(why_wrong(before, after, played, stats))
    picks = played.picks
    window = max(1, len(picks) // 5)
    console.print(
        f"right first time, over the agent's own {len(picks)} picks (not its {played.follow_ups} scripted "
        f"follow-ups): {np.mean(picks[:window]):.0%} of the first {window} → "
        f"{np.mean(picks[-window:]):.0%} of the last {window}"
    )
    mean = "n/a" if stats["mean_reward"] is None else f"{stats['mean_reward']:.2f}"
    console.print(
        f"learner: policy {stats['policy']}, {stats['decisions']} decisions, {stats['calls']} calls, "
        f"{played.ratings} ratings, {stats['updates']} updates, mean reward {mean} per call"
    )
    for block in sequences:
        console.print(f"sequences: {getattr(block, 'text', '')}")


def why_wrong(before: dict[str, str], after: dict[str, str], played: Played, stats: dict[str, Any]) -> str:
    """Why a pick may still be wrong, from what this run measured: what was learned from, how much."""
    wrong = [i for i in INTENTS if after[i.label] != i.tool]
    lines = [
        f"{len(INTENTS) - len(wrong)} of {len(INTENTS)} picks right. toolwise ({stats['policy']}) learns from "
        f"every call the agent makes and its rating ({played.ratings} here), on top of a prior from the tools' "
        "names and descriptions. This scripted agent calls only what toolwise recommended, so a request whose "
        "right tool was seldom recommended has few calls to learn from"
        + (":" if wrong else ", and words it has not seen may still get a wrong pick.")
    ]
    for i in wrong:
        asked, right = played.asked.get(i.label, 0), played.right.get(i.label, 0)
        prior = " (also the first pick before any rating)" if before[i.label] == after[i.label] else ""
        lines.append(
            f"- {i.label!r}: asked {asked} times in {len(i.phrasings)} phrasings, {i.tool} recommended "
            f"{right} of them; now {after[i.label]}{prior}"
        )
    return "\n".join(lines)
