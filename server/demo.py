"""`toolwise demo`: the main job end to end, with no set-up.

Starts toolwise over stdio on a config (the example by default) with a throwaway database and a
scratch git repository, then plays an agent through a real MCP client: it asks `recommend_tool`
in varied words, calls what was recommended, rates the result (5 when it was the right tool for
the request, 1 when not), follows up within a session, and ends sessions. Shows what the
recommendations were before and after, and how often they were right early and late.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table


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


async def run_demo(config: Path, calls: int, seed: int, database_url: str | None = None) -> None:
    console = Console(stderr=False)
    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory(prefix="toolwise-demo-") as tmp:
        folder = Path(tmp)
        repo = scratch_repo(folder)
        raw = json.loads(config.read_text())  # noqa: ASYNC240 - a small file, read once at start
        raw["toolwise"] = {
            **raw.get("toolwise", {}),
            "database_url": database_url or f"sqlite+aiosqlite:///{folder / 'demo.db'}",
            "seed": seed,
        }
        demo_config = folder / "config.json"
        demo_config.write_text(json.dumps(raw))
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "toolwise.server", "serve", "-c", str(demo_config), "--log-level", "error"],
        )
        console.print(f"[bold]toolwise demo[/]: {config.name}, scratch repo {repo}, {calls} tool calls")
        async with Client(params, read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            console.print(f"serving {len(tools)} tools: " + ", ".join(t.name for t in tools if "__" in t.name))
            canonical = {i.label: i.phrasings[0].format(city="Paris") for i in INTENTS}
            before = {label: await top_pick(client, q, "probe-before") for label, q in canonical.items()}
            hits = await play(client, console, rng, repo, calls)
            after = {label: await top_pick(client, q, "probe-after") for label, q in canonical.items()}
            stats = (await client.call_tool("get_learning_stats", {})).structured_content
            sequences = (await client.call_tool("get_successful_sequences", {"limit": 3})).content
        show(console, before, after, hits, stats, sequences)


async def play(client: Client, console: Console, rng: np.random.Generator, repo: Path, calls: int) -> list[bool]:
    hits: list[bool] = []
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=console) as progress:
        task = progress.add_task("scripted agent", total=calls)
        episode = 0
        while len(hits) < calls:
            intent = INTENTS[int(rng.integers(len(INTENTS)))]
            city = CITIES[int(rng.integers(len(CITIES)))]
            query = intent.phrasings[int(rng.integers(len(intent.phrasings)))].format(city=city)
            session = f"demo-{episode}"
            episode += 1
            chosen = await top_pick(client, query, session)
            right = chosen == intent.tool
            await client.call_tool(chosen, arguments(chosen, city, repo), meta={"toolwise/session_id": session})
            await client.call_tool("submit_feedback", {"rating": 5 if right else 1, "session_id": session})
            hits.append(right)
            if right and intent.follow_up:
                await client.call_tool(
                    intent.follow_up, {"repo_path": str(repo)}, meta={"toolwise/session_id": session}
                )
                hits.append(True)
            await client.call_tool("end_session", {"outcome": "success" if right else "failure", "session_id": session})
            progress.update(task, completed=min(len(hits), calls))
    return hits[:calls]


def show(
    console: Console,
    before: dict[str, str],
    after: dict[str, str],
    hits: list[bool],
    stats: dict[str, Any],
    sequences: list[Any],
) -> None:
    table = Table(title="top recommendation for each request")
    for column in ("request", "right tool", "before", "after"):
        table.add_column(column)
    for intent in INTENTS:

        def mark(tool: str, right: str = intent.tool) -> str:
            return f"[green]{tool}[/]" if tool == right else f"[red]{tool}[/]"

        table.add_row(
            intent.phrasings[0].format(city="Paris"), intent.tool, mark(before[intent.label]), mark(after[intent.label])
        )
    console.print(table)
    window = max(1, len(hits) // 5)
    console.print(
        f"right first time: {np.mean(hits[:window]):.0%} of the first {window} calls → "
        f"{np.mean(hits[-window:]):.0%} of the last {window}"
    )
    console.print(
        f"learner: policy {stats['policy']}, {stats['decisions']} decisions, {stats['calls']} calls, "
        f"mean reward {stats['mean_reward']:.2f}, {stats['committed_records']} records written"
    )
    for block in sequences:
        console.print(f"sequences: {getattr(block, 'text', '')}")
