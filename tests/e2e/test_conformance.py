"""The MCP conformance suite's server scenarios against their server directly and behind toolwise
(`prefix: ""`): every scenario that passes directly passes through toolwise, with the pinned suite
(0.1.16) and with its newest prerelease (0.2.0-alpha.12, the 2026-07-28 scenarios among them)."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, toolwise_http
from tests.e2e.node import CONFORMANCE, CONFORMANCE_PRERELEASE, node_for

SERVER = Path(__file__).with_name("conformance_server.py")
LINE = re.compile(r"^[✓✗] (?P<scenario>\S+): (?P<passed>\d+) passed, (?P<failed>\d+) failed", re.MULTILINE)


@asynccontextmanager
async def conformance_server() -> AsyncIterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port)], stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.1)
        yield f"http://localhost:{port}/mcp"
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


async def run_suite(node: str, suite: Path, url: str) -> dict[str, bool]:
    """Every server scenario (`--suite all`): scenario → passed (no failed check)."""
    proc = await asyncio.create_subprocess_exec(
        node, str(suite), "server", "--url", url, "--suite", "all",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
    results = {m["scenario"]: m["failed"] == "0" for m in LINE.finditer(out.decode())}
    assert results, out.decode()[-3000:]
    return results


@pytest.mark.parametrize("suite", [CONFORMANCE, CONFORMANCE_PRERELEASE], ids=["pinned", "prerelease"])
async def test_every_scenario_that_passes_directly_passes_through_toolwise(tmp_path: Path, suite: Path) -> None:
    node = node_for(suite)
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"everything": {"command": sys.executable, "args": [str(SERVER)], "prefix": ""}},
                # the scenarios and their server are of the handshake era (server→client requests mid-call)
                "toolwise": {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'tw.db'}", "mode": "legacy"},
            }
        )
    )
    async with conformance_server() as url:
        direct = await run_suite(node, suite, url)
    async with toolwise_http(config) as url:
        proxied = await run_suite(node, suite, url.replace("127.0.0.1", "localhost"))
    counts = f"direct {sum(direct.values())}/{len(direct)}, through toolwise {sum(proxied.values())}/{len(proxied)}"
    print(f"conformance scenarios passed: {counts}")
    lost = sorted(s for s, ok in direct.items() if ok and not proxied.get(s))
    assert not lost, f"pass directly but not through toolwise: {lost} ({counts})"
    assert len(direct) >= 30 and sum(direct.values()) >= 30, counts
