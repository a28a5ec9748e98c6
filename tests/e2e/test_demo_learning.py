"""What the demo shows learning do, through the real `toolwise demo`: no request it had right before
learning is wrong after it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.e2e.conftest import BIN
from toolwise.cli.demo_agent import INTENTS


def test_the_default_demo_has_no_request_that_learning_turned_from_right_to_wrong(tmp_path: Path) -> None:
    """The default seed (7), 300 calls: "what time is it in Paris" was right before learning and, after
    convert_time was picked for it twice, rated 1 and corrected each time, wrong after (its successes on
    conversions naming Paris outvoted the request's own failures)."""
    env = {"COLUMNS": "120", "PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    database = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    demo = subprocess.run(
        [str(BIN / "toolwise"), "demo", "--database-url", database],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert demo.returncode == 0, demo.stderr
    rows = [line.split("│") for line in demo.stdout.splitlines() if re.match(r"│ \S", line)]
    before_after = {cells[2].strip(): (cells[3].strip(), cells[4].strip()) for cells in rows}
    assert set(before_after) == {i.tool for i in INTENTS}, demo.stdout
    worse = [tool for tool, (before, after) in before_after.items() if before == "✓" and after != "✓"]
    assert worse == [], demo.stdout
    assert f"{len(INTENTS)} of {len(INTENTS)} picks right" in demo.stdout
