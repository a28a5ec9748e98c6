"""A long log, through a real client: toolwise answers while it replays, and a client closing stdin
(the SDK's stdio client: 2 s, then SIGTERM) still leaves the shutdown snapshot behind."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

from tests.e2e.conftest import BIN, rows, time_server, toolwise
from toolwise.feedback import Execution, FeedbackService, utcnow

ROWS = 100_000


async def fill(db: Path, n: int) -> None:
    """n executions of another instance, through the service's group-commit (bulk) insert path."""
    start = utcnow() - timedelta(days=30)
    async with FeedbackService(f"sqlite+aiosqlite:///{db}", synchronous="OFF") as feedback:
        for i in range(n):
            finished = start + timedelta(seconds=i)
            await feedback.log.record_execution(
                Execution(
                    tool="time__get_current_time" if i % 3 else "time__convert_time",
                    server="time",
                    session_id=f"s{i // 8}",
                    success=i % 10 != 0,
                    latency_ms=20.0 + i % 50,
                    started_at=finished,
                    finished_at=finished,
                    position=i % 8,
                    query="what time is it",
                    instance="another",
                )
            )


async def test_closing_stdin_on_a_long_log_leaves_the_shutdown_snapshot(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    db = tmp_path / "toolwise.db"
    await fill(db, ROWS)
    config = write_config({"time": time_server()}, seed=None)  # under a seed, a recommendation waits for the replay
    async with toolwise(config) as client:
        names = [t.name for t in (await client.list_tools()).tools]  # answered while the log is replayed
        assert "time__get_current_time" in names
        stats = (await client.call_tool("get_learning_stats", {})).structured_content
        assert "catching up" in stats["serving"]
        recommended = await client.call_tool("recommend_tool", {"query": "what time is it in Tokyo"})
        assert not recommended.is_error
        await client.call_tool("time__get_current_time", {"timezone": "UTC"})
    # The client closed stdin (and would have sent SIGTERM after 2 s): the snapshot was stored first.
    assert ("shutdown",) in rows(db, "SELECT source FROM snapshots")
    assert rows(db, "SELECT count(*) FROM instances WHERE stopped_at IS NOT NULL") == [(1,)]


def test_sigterm_stops_toolwise_with_its_shutdown_snapshot(write_config: Callable[..., Path], tmp_path: Path) -> None:
    config = write_config({"time": time_server()})
    server = subprocess.Popen(
        [str(BIN / "toolwise"), "serve", "--config", str(config), "--log-level", "info"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    try:
        for line in server.stderr:  # wait until it serves (not the first line, naming the config)
            if "tools on stdio" in line:
                break
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
    finally:
        server.kill()
    assert rows(tmp_path / "toolwise.db", "SELECT source FROM snapshots") == [("shutdown",)]
