from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from mcp import Client

from tests.e2e.conftest import BIN, rows, time_server, toolwise_http


def scrape(url: str) -> str:
    """The Prometheus page once both calls' deferred work has run (it runs after a short idle delay)."""
    for _ in range(50):
        with urllib.request.urlopen(url, timeout=5) as response:
            page: str = response.read().decode()
        if "toolwise_calls_total{" in page and "} 2.0" in page:
            return page
        time.sleep(0.05)
    return page


async def test_streamable_http_transport_serves_and_records(write_config: Callable[..., Path], tmp_path: Path) -> None:
    config = write_config({"time": time_server()})
    async with toolwise_http(config) as url:  # stopped with SIGINT; exit code 0 asserted there
        for mode in ("auto", "legacy"):
            async with Client(url, mode=mode) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"time__get_current_time", "recommend_tool"} <= names
                result = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
                assert not result.is_error and "toolwise/execution_id" in (result.meta or {})
        metrics = await asyncio.to_thread(scrape, url.removesuffix("/mcp") + "/metrics")
        assert 'toolwise_calls_total{outcome="success",tool="time__get_current_time"} 2.0' in metrics
        assert 'toolwise_call_latency_seconds_count{tool="time__get_current_time"} 2.0' in metrics
        assert "\ntoolwise_queue_depth " in metrics and "\ntoolwise_open_circuits 0.0" in metrics
        assert "\ntoolwise_exploration_epsilon 0.0" in metrics and "\ntoolwise_reopened_tools 0.0" in metrics
    assert rows(tmp_path / "toolwise.db", "SELECT count(*) FROM executions") == [(2,)]


def test_broken_config_gives_one_clear_message_and_exit_code_2(tmp_path: Path) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"mcpServers": {"time": {"args": ["x"]}}, "toolwise": {"policy": "magic"}}))
    proc = subprocess.run([str(BIN / "toolwise"), "serve", "--config", str(config)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "policy" in proc.stderr and "magic" in proc.stderr
    assert proc.stdout == "", "stdout is the protocol: nothing else may go there"


@pytest.mark.skipif(shutil.which("npx") is None, reason="node/npx is not installed: the MCP Inspector CLI needs it")
def test_mcp_inspector_cli_lists_and_calls_tools(write_config: Callable[..., Path]) -> None:
    config = str(write_config())
    # The Inspector takes every --long option as its own, so the server gets the short -c.
    base = ["npx", "-y", "@modelcontextprotocol/inspector", "--cli", str(BIN / "toolwise"), "serve", "-c", config]
    env = {**os.environ, "npm_config_update_notifier": "false"}
    listed = subprocess.run([*base, "--method", "tools/list"], capture_output=True, text=True, timeout=300, env=env)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "time__get_current_time" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    called = subprocess.run(
        [*base, "--method", "tools/call", "--tool-name", "recommend_tool", "--tool-arg", "query=current time in Paris"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert called.returncode == 0, called.stderr[-2000:]
    assert "time__" in json.loads(called.stdout)["structuredContent"]["recommendations"][0]["tool"]
