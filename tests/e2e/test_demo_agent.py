"""The demo's scripted agent acts as a real one would: valid arguments for every tool of the example, and
after a wrong pick a rating of 1 and the right tool called in the same session; so what the demo shows
toolwise learning ends right."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import BIN, toolwise
from toolwise.cli.demo_agent import INTENTS, arguments, scratch_repo


async def test_every_tool_of_the_example_works_with_the_arguments_the_demo_agent_passes(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    repo = scratch_repo(tmp_path)
    async with toolwise(write_config()) as client:
        names = [t.name for t in (await client.list_tools()).tools if "__" in t.name]
        assert len(names) == 14, names
        failed = {}
        for name in sorted(names, key=lambda n: n != "git__git_add"):  # staged first: a commit has something
            args = arguments(name, "Paris", repo, 0)
            assert args is not None, f"no recipe for {name}"
            result = await client.call_tool(name, args)
            if result.is_error:
                failed[name] = str(result.content)
    assert failed == {}


def test_the_demo_ends_with_every_pick_right_and_records_the_agents_corrections(tmp_path: Path) -> None:
    """Seed 0, the default 300 calls. The old agent called only toolwise's picks (git_show and git_diff
    with no revision or target, failing on their arguments): toolwise learned its own habit, 4 of 5."""
    database = tmp_path / "demo.db"
    env = {"COLUMNS": "120", "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    command = [str(BIN / "toolwise"), "demo", "--seed", "0", "--database-url", f"sqlite+aiosqlite:///{database}"]
    demo = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env)
    assert demo.returncode == 0, demo.stderr
    rows = [line for line in demo.stdout.splitlines() if re.match(r"│ \S", line)]
    after = {row.split("│")[2].strip(): row.split("│")[4].strip() for row in rows}
    assert after == {i.tool: "✓" for i in INTENTS}, demo.stdout
    assert f"{len(INTENTS)} of {len(INTENTS)} picks right" in demo.stdout
    with sqlite3.connect(database) as db:
        calls = db.execute(
            "SELECT e.session_id, e.tool, e.error_type, r.rating FROM executions e "
            "LEFT JOIN ratings r ON r.execution_id = e.id ORDER BY e.seq"
        ).fetchall()
    assert [c for c in calls if c[2] is not None] == [], "every call has valid arguments"
    sessions: dict[str, list[tuple[str, int | None]]] = {}
    for session, tool, _, rating in calls:
        sessions.setdefault(session, []).append((tool, rating))
    corrected = [s for s in sessions.values() if s[0][1] == 1]
    assert corrected, "some picks were wrong and corrected"
    assert all(len(s) >= 2 and s[1][0] != s[0][0] and s[1][1] == 5 for s in corrected[:-1]), corrected
