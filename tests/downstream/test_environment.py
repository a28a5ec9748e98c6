"""Which program a stdio downstream's command starts: the one its own `env` PATH finds first (as Claude Desktop
and Claude Code start it), so that a server given `"env": {"PATH": ".../node/v20/bin:..."}` runs that node's
launcher, not the one first on toolwise's own PATH."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from toolwise.config import Settings, StdioServer
from toolwise.downstream.connection import Downstream

SERVER = Path(__file__).resolve().parents[1] / "e2e" / "flaky_server.py"  # a real MCP server with one tool
WAIT_S = 30.0


def script(folder: Path, body: str) -> None:
    folder.mkdir()
    path = folder / "tw-launcher"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.mark.skipif(os.name != "posix", reason="a shell script as the command")
async def test_the_command_is_found_on_the_server_s_own_path_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script(tmp_path / "theirs", f'exec "{sys.executable}" "{SERVER}"')
    script(tmp_path / "ours", "echo 'the launcher on toolwise PATH' >&2; exit 7")
    monkeypatch.setenv("PATH", f"{tmp_path / 'ours'}{os.pathsep}{os.environ['PATH']}")
    theirs = f"{tmp_path / 'theirs'}{os.pathsep}{os.environ['PATH']}"
    spec = StdioServer.model_validate({"command": "tw-launcher", "env": {"PATH": theirs}})
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}", start_timeout_s=WAIT_S)
    downstream = Downstream("launched", spec, settings, lambda: None)
    downstream.start()
    try:
        await asyncio.wait_for(downstream.wait_first_attempt(), WAIT_S)
        assert (downstream.state, downstream.error) == ("ready", None)
        assert [t.name for t in downstream.tools] == ["work"]
    finally:
        await downstream.aclose()
