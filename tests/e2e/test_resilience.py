"""What an unlucky user does to a running toolwise: cancels calls, stops it with signals, points it
at a broken database. Every answered call stays recorded and every background task stays alive."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from tests.e2e.conftest import rows, time_server, toolwise

CONVERT = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}


async def test_cancelled_own_tool_calls_leave_the_writer_recording(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = write_config({"time": time_server()})
    answered = 0
    async with toolwise(config) as client:
        for i in range(30):
            assert not (await client.call_tool("time__convert_time", CONVERT)).is_error
            answered += 1
            # The client gives up (a timeout, a user's stop): the request is cancelled in the server.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.call_tool("get_tool_metrics", {}), 0.002 + (i % 10) * 0.002)
        metrics = await client.call_tool("get_tool_metrics", {})
        assert not metrics.is_error, metrics.content
        assert metrics.structured_content["metrics"][0]["calls"] == answered
    assert rows(tmp_path / "toolwise.db", "SELECT count(*) FROM executions") == [(answered,)]
    assert rows(tmp_path / "toolwise.db", "SELECT source FROM snapshots") == [("shutdown",)]
