"""The demo's scripted agent: what a user asks for, and how an agent that consults toolwise acts on it.

Each request is a session: the agent asks `recommend_tool`, calls the pick with valid arguments (a recipe
for each of the example's tools), rates it (5 when it was the right tool for the request, 1 when not) and,
after a wrong pick, calls the right tool itself in the same session and rates that, as an LLM agent
corrects itself; then a scripted follow-up where the request has one, and the session ends. What toolwise
learns from is what real use gives it: every call, its outcome, the ratings, and which tool the agent
ended up calling for the request.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from mcp import Client
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from toolwise.learning.sessions import session_meta


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
RIGHT, WRONG = 5, 1  # the agent's ratings of a call that did / did not do what the request asked


def arguments(tool: str, city: str, repo: Path, episode: int) -> dict[str, Any] | None:
    """Valid arguments for each of the example's 14 tools, as an agent reading their schemas passes them
    (None: a tool the agent has no recipe for, from another config; it does not call it)."""
    at = {"repo_path": str(repo)}
    recipes: dict[str, dict[str, Any]] = {
        "time__get_current_time": {"timezone": ZONES[city]},
        "time__convert_time": {"source_timezone": ZONES[city], "time": "09:00", "target_timezone": "Europe/London"},
        "git__git_status": at,
        "git__git_diff_unstaged": at,
        "git__git_diff_staged": at,
        "git__git_diff": {**at, "target": "HEAD"},
        "git__git_commit": {**at, "message": f"demo edit {episode}"},
        "git__git_add": {**at, "files": ["notes.txt"]},
        "git__git_reset": at,
        "git__git_log": {**at, "max_count": 3},
        "git__git_create_branch": {**at, "branch_name": f"demo-{episode}"},
        "git__git_checkout": {**at, "branch_name": "main"},
        "git__git_show": {**at, "revision": "HEAD"},
        "git__git_branch": {**at, "branch_type": "local"},
    }
    return recipes.get(tool)


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


async def recommend(client: Client, query: str, session: str) -> list[dict[str, Any]]:
    """toolwise's top 3 for the request, best first (tool, confidence, p_agent, evidence…)."""
    result = await client.call_tool("recommend_tool", {"query": query, "session_id": session, "top_k": 3})
    if result.is_error:
        raise RuntimeError(f"recommend_tool failed: {result.content}")
    return list(result.structured_content["recommendations"])


async def top_pick(client: Client, query: str, session: str) -> str:
    return str((await recommend(client, query, session))[0]["tool"])


@dataclass
class Played:
    """What the scripted agent did, counted as it went: the figures the demo prints."""

    picks: list[bool] = field(default_factory=list)  # toolwise's pick for each request: right or not
    calls: int = 0  # tool calls made (picks, corrections, follow-ups)
    corrections: int = 0  # the right tool, called by the agent after a wrong pick
    corrected: dict[tuple[str, str], int] = field(default_factory=dict)  # (wrong pick, right tool) → times
    follow_ups: int = 0  # scripted calls after the right tool (not picks, never counted as hits)
    ratings: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # tool → calls that failed
    asked: dict[str, int] = field(default_factory=dict)  # intent → requests made
    right: dict[str, int] = field(default_factory=dict)  # intent → right picks

    def request(self, intent: Intent, right: bool) -> None:
        self.picks.append(right)
        self.asked[intent.label] = self.asked.get(intent.label, 0) + 1
        self.right[intent.label] = self.right.get(intent.label, 0) + right

    def correct(self, pick: str, tool: str) -> None:
        self.corrections += 1
        self.corrected[pick, tool] = self.corrected.get((pick, tool), 0) + 1

    def rated(self) -> None:
        self.ratings += 1

    def called(self, tool: str, worked: bool) -> None:
        self.calls += 1
        if not worked:
            self.failed[tool] = self.failed.get(tool, 0) + 1


@dataclass
class Request:
    """One request's session: the calls the agent makes in it."""

    client: Client
    played: Played
    session: str
    city: str
    repo: Path
    episode: int

    async def call(self, tool: str) -> bool | None:
        """Call `tool` with its recipe's arguments; whether it worked (None: no recipe, not called)."""
        args = arguments(tool, self.city, self.repo, self.episode)
        if args is None:
            return None
        result = await self.client.call_tool(tool, args, meta=session_meta(self.session))
        self.played.called(tool, not result.is_error)
        return not result.is_error

    async def rate(self, rating: int) -> None:
        """Rate the session's latest call."""
        await self.client.call_tool("submit_feedback", {"rating": rating, "session_id": self.session})
        self.played.rated()


async def play(client: Client, console: Console, rng: np.random.Generator, repo: Path, calls: int) -> Played:
    played = Played()
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn())
    # None where it cannot redraw (a pipe, a dumb terminal): rich would print its last frame there, and an empty line.
    with Progress(*columns, console=console, disable=not console.is_interactive) as progress:
        task = progress.add_task("tool calls", total=calls)
        episode = 0
        while played.calls < calls:
            intent = INTENTS[int(rng.integers(len(INTENTS)))]
            city = CITIES[int(rng.integers(len(CITIES)))]
            query = intent.phrasings[int(rng.integers(len(intent.phrasings)))].format(city=city)
            (repo / "notes.txt").write_text(f"first\nedit {episode}\n")  # the user has uncommitted work
            request = Request(client, played, f"demo-{episode}", city, repo, episode)
            episode += 1
            await serve(request, intent, query, calls)
            progress.update(task, completed=played.calls)
    return played


async def serve(request: Request, intent: Intent, query: str, calls: int) -> None:
    """One request: toolwise's pick, the agent's correction when the pick was wrong, the follow-up."""
    played = request.played
    chosen = await top_pick(request.client, query, request.session)
    right = chosen == intent.tool
    played.request(intent, right)
    worked = await request.call(chosen)
    if worked is not None:
        await request.rate(RIGHT if right and worked else WRONG)
    done = right and bool(worked)
    if not right and played.calls < calls:  # the agent corrects itself
        done = bool(await request.call(intent.tool))
        played.correct(chosen, intent.tool)
        await request.rate(RIGHT if done else WRONG)
    if done and intent.follow_up and played.calls < calls:
        await request.call(intent.follow_up)
        played.follow_ups += 1
    outcome = "success" if done else "failure"
    await request.client.call_tool("end_session", {"outcome": outcome, "session_id": request.session})
