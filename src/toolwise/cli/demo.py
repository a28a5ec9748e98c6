"""`toolwise demo`: the main job end to end, with no set-up.

Starts toolwise over stdio on a config (the example by default) with a database of its own (`demo.db`
in the data dir, made afresh each run, or the one --database-url names) and a scratch git repository,
then plays an agent through a real MCP client (cli/demo_agent.py): it asks `recommend_tool` in varied
words, calls the pick, rates it, and after a wrong pick calls the right tool itself, as an agent corrects
itself. Shows what the recommendations were before and after, how often they were right early and late,
and the `inspect` command that reads what it recorded.

Every figure printed is measured in the run. The same `--seed` prints the same output: the demo
leaves latency out of the rewards and keeps a shielded tool out for the rest of the run, the two
places where the wall clock would otherwise steer what is learned.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.table import Table

from toolwise.cli.clients import toolwise_command
from toolwise.cli.demo_agent import INTENTS, Played, play, recommend, scratch_repo, top_pick
from toolwise.cli.doctor import near_commands
from toolwise.config import AppConfig, StdioServer
from toolwise.downstream.environment import command_found
from toolwise.feedback import FeedbackService
from toolwise.feedback.files import data_dir
from toolwise.rl.policies.outcome import OutcomeModelConfig

# Settings the demo lays over the config's so that a seed replays exactly (see the module docstring).
REPLAYABLE = {"shield_retry_s": 1e9}
REPLAYABLE_REWARD = {"latency_per_second": 0.0, "fast_bonus": 0.0}


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
            after = {label: await recommend(client, q, "probe-after") for label, q in canonical.items()}
            stats = (await client.call_tool("get_learning_stats", {})).structured_content
            sequences = (await client.call_tool("get_successful_sequences", {"limit": 3})).structured_content
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


def show(
    console: Console,
    before: dict[str, str],
    after_ranked: dict[str, list[dict[str, Any]]],
    played: Played,
    stats: dict[str, Any],
    sequences: dict[str, Any],
) -> None:
    after = {label: str(ranked[0]["tool"]) for label, ranked in after_ranked.items()}
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
    console.print(explain(before, after_ranked, played, stats))
    picks = played.picks
    window = max(1, len(picks) // 5)
    console.print(
        f"right first time, toolwise's picks: {np.mean(picks[:window]):.0%} of the first {window} requests → "
        f"{np.mean(picks[-window:]):.0%} of the last {window} (the agent's {played.corrections} corrections and "
        f"{played.follow_ups} scripted follow-ups are not picks)"
    )
    if played.failed:
        failed = ", ".join(f"{tool} {n}×" for tool, n in sorted(played.failed.items()))
        console.print(f"calls that failed (the tool's own error answer): {failed}")
    mean = "n/a" if stats["mean_reward"] is None else f"{stats['mean_reward']:.2f}"
    console.print(
        f"learner: policy {stats['policy']}, {stats['decisions']} decisions, {stats['calls']} calls, "
        f"{played.ratings} ratings, {stats['updates']} updates, mean reward {mean} per call"
    )
    for item in sequences["sequences"]:
        console.print(f"sequence: {item['description']}{corrections_in(item['sequence'], played)}")


def corrections_in(sequence: list[str], played: Played) -> str:
    """Which steps of a learned sequence were the agent's corrections of a pick it rated 1: toolwise
    counts a step by how the call it ends on went."""
    steps = [(a, b) for a, b in itertools.pairwise(sequence) if (a, b) in played.corrected]
    said = "the agent's correction of a pick rated 1"
    return "".join(f"; {a} → {b}: {said}, {played.corrected[a, b]}×" for a, b in steps)


def explain(
    before: dict[str, str], after: dict[str, list[dict[str, Any]]], played: Played, stats: dict[str, Any]
) -> str:
    """What the agent did and what toolwise learned it from, as this run measured it; where a pick is
    still wrong, how often that request came and was picked right, and what toolwise estimates of it."""
    wrong = [i for i in INTENTS if after[i.label][0]["tool"] != i.tool]
    lines = [
        f"{len(INTENTS) - len(wrong)} of {len(INTENTS)} picks right. The agent called toolwise's pick for "
        f"each of {len(played.picks)} requests and rated it; after a wrong one it rated it 1 and called the "
        f"right tool itself ({played.corrections} times). toolwise ({stats['policy']}) learned from all "
        f"{played.calls} calls and {played.ratings} ratings, on top of a prior from the tools' names and "
        "descriptions: which tool the agent ends up calling for a request, and whether a call worked"
        + (":" if wrong else ".")
    ]
    for i in wrong:
        asked, right = played.asked.get(i.label, 0), played.right.get(i.label, 0)
        pick = after[i.label][0]
        prior = " (also the first pick before any rating)" if before[i.label] == pick["tool"] else ""
        lines.append(
            f"- {i.label!r}: asked {asked} times in {len(i.phrasings)} phrasings, {i.tool} picked {right} "
            f"of them, the agent corrected the rest; now {pick['tool']}{prior}{estimates(after[i.label], i.tool)}"
        )
    return "\n".join(lines)


def estimates(ranked: list[dict[str, Any]], right: str) -> str:
    """The outcome policy's figures for a wrong first pick: it puts first the tool the agent is predicted
    to call (p_agent) unless that one is predicted to fail (P(works) under 0.5 on enough evidence)."""
    pick = ranked[0]
    if pick.get("p_agent") is None:  # another policy: no such figures
        return ""
    found = [r for r in ranked if r["tool"] == right]
    beside = f", {right} {found[0]['confidence']:.2f}" if found else ""
    return (
        f": the agent is predicted to call it ({pick['p_agent']:.2f}), and P(works) is "
        f"{pick['confidence']:.2f}{beside}; toolwise overrides the predicted call only under "
        f"{OutcomeModelConfig().fails_below:.2f}"
    )
