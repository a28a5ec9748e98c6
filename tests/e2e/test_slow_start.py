"""A downstream that takes longer to start than `start_wait_s` (a loaded machine, a server that downloads
something first): toolwise serves without it meanwhile, yet a client's first tools/list and a call of one of
its tools wait for it (up to `start_timeout_s`), since not every client refreshes on `list_changed`."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.conftest import BIN, toolwise
from tests.e2e.test_http_shutdown import hung_server
from tests.e2e.test_resilience import CONVERT


def slow_time_server(delay_s: float) -> dict[str, Any]:
    """mcp-server-time, started `delay_s` seconds late."""
    script = "import os, sys, time; time.sleep(float(sys.argv[1])); os.execv(sys.argv[2], sys.argv[2:])"
    args = ["-c", script, str(delay_s), str(BIN / "mcp-server-time"), "--local-timezone", "UTC"]
    return {"command": sys.executable, "args": args}


async def test_a_first_tools_list_waits_for_a_downstream_still_starting(
    write_config: Callable[..., Path],
) -> None:
    # The hung one times out its start (start_timeout_s) and is listed without; the slow one is listed.
    servers = {"time": slow_time_server(2), "hung": hung_server("")}
    config = write_config(servers, start_wait_s=0.2, start_timeout_s=8)
    async with toolwise(config) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert {"time__convert_time", "time__get_current_time", "recommend_tool"} <= names


async def test_a_first_call_of_a_tool_still_starting_waits_for_it(write_config: Callable[..., Path]) -> None:
    config = write_config({"time": slow_time_server(2)}, start_wait_s=0.2, start_timeout_s=30)
    async with toolwise(config) as client:
        result = await client.call_tool("time__convert_time", CONVERT)
    assert not result.is_error, result.content
