"""A client shows toolwise's stderr as its MCP log: the first start on a fresh database says in one line of
toolwise's own that it made the schema, not Alembic's nine lines of each revision; a later start says nothing
of it; `--log-level debug` or `toolwise --debug` shows Alembic's lines again."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.conftest import BIN
from toolwise.feedback.migrate import HEAD


def serve(tmp_path: Path, db: str, *options: str, log_level: str = "info") -> list[str]:
    """`toolwise serve` on no downstream until its stdin closes (at once); the lines of its stderr."""
    config = tmp_path / "toolwise.json"
    config.write_text('{"mcpServers": {}}')
    url = f"sqlite+aiosqlite:///{tmp_path / db}"
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
    args = [*options, "serve", "-c", str(config), "--database-url", url, "--log-level", log_level]
    done = subprocess.run(
        [str(BIN / "toolwise"), *args], capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


def test_a_first_start_logs_one_line_of_its_own_for_the_schema_and_none_of_alembics(tmp_path: Path) -> None:
    first = serve(tmp_path, "t.db")
    assert not [line for line in first if "alembic" in line.lower()], first
    assert [line.split(": ", 1)[1] for line in first if "schema" in line] == [f"database schema created at {HEAD}"]
    again = serve(tmp_path, "t.db")
    assert not [line for line in again if "schema" in line or "alembic" in line.lower()], again


def test_a_debug_log_level_or_debug_shows_alembics_own_lines(tmp_path: Path) -> None:
    for db, options, level in (("a.db", (), "debug"), ("b.db", ("--debug",), "info")):
        said = serve(tmp_path, db, *options, log_level=level)
        assert any(f"-> {HEAD}, " in line and "alembic" in line for line in said), said
