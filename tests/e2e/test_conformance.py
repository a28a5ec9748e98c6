"""The MCP conformance suite's server scenarios against a server directly and behind toolwise
(`prefix: ""`): every scenario that passes directly passes through toolwise.

- The pinned suite (0.1.16) and the newest prerelease (0.2.0-alpha.12) against our handshake-era
  server (`conformance_server.py`, a stdio downstream behind toolwise).
- The newest prerelease against its own reference server (`reference/`, TypeScript, both protocol
  eras, an HTTP downstream), through toolwise in both modes: `auto` equals direct; `legacy` (the
  handshake and nothing else) equals direct except the scenarios of the 2026-07-28 path, which that
  server serves only to a 2026-07-28 connection."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from tests.e2e.conftest import free_port, toolwise_http
from tests.e2e.node import CONFORMANCE, CONFORMANCE_PRERELEASE, NODE_DIR, node_for

SERVER = Path(__file__).with_name("conformance_server.py")
REFERENCE = NODE_DIR / "reference"  # tests/e2e/reference/, installed there by .ci/run
TSX = REFERENCE / "node_modules" / "tsx" / "dist" / "cli.mjs"
# Served on the 2026-07-28 path only: `mode: legacy` never opens one.
ERA_2026 = re.compile(r"^(input-required-result-.*|server-stateless)$")
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


@asynccontextmanager
async def reference_server(node: str, log: Path) -> AsyncIterator[str]:
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [node, str(TSX), "everything-server.ts"], cwd=REFERENCE, env=env, stdout=out, stderr=out
        )
    try:
        for _ in range(600):  # tsx compiles it first
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                assert proc.poll() is None, f"the reference server exited: see {log}"
                await asyncio.sleep(0.1)
        yield f"http://localhost:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


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

    async def directly() -> dict[str, bool]:
        async with conformance_server() as url:
            return await run_suite(node, suite, url)

    async def through_toolwise() -> dict[str, bool]:
        async with toolwise_http(config) as url:
            return await run_suite(node, suite, url.replace("127.0.0.1", "localhost"))

    direct, proxied = await asyncio.gather(directly(), through_toolwise())  # two servers of their own
    counts = f"direct {sum(direct.values())}/{len(direct)}, through toolwise {sum(proxied.values())}/{len(proxied)}"
    print(f"conformance scenarios passed: {counts}")
    lost = sorted(s for s, ok in direct.items() if ok and not proxied.get(s))
    assert not lost, f"pass directly but not through toolwise: {lost} ({counts})"
    assert len(direct) >= 30 and sum(direct.values()) >= 30, counts


async def test_the_newest_prerelease_passes_through_toolwise_in_both_modes_as_against_its_reference_server(
    tmp_path: Path,
) -> None:
    node = node_for(CONFORMANCE_PRERELEASE)
    node_for(TSX)

    async def through_toolwise(mode: str, reference: str) -> dict[str, bool]:
        config = tmp_path / f"{mode}.json"
        database = f"sqlite+aiosqlite:///{tmp_path / (mode + '.db')}"
        servers = {"everything": {"url": reference, "prefix": ""}}
        config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database, "mode": mode}}))
        async with toolwise_http(config) as url:
            return await run_suite(node, CONFORMANCE_PRERELEASE, url.replace("127.0.0.1", "localhost"))

    async with reference_server(node, tmp_path / "reference.log") as reference:
        direct = await run_suite(node, CONFORMANCE_PRERELEASE, reference)
        auto, legacy = await asyncio.gather(through_toolwise("auto", reference), through_toolwise("legacy", reference))
    counts = [
        f"{name} {sum(r.values())}/{len(r)}" for name, r in (("direct", direct), ("auto", auto), ("legacy", legacy))
    ]
    lost = {
        name: sorted(s for s, ok in direct.items() if ok and not r.get(s))
        for name, r in (("auto", auto), ("legacy", legacy))
    }
    print(f"conformance scenarios passed against the reference server: {', '.join(counts)}")
    assert sum(direct.values()) >= 50, counts
    assert lost["auto"] == [], f"pass directly but not through toolwise (auto): {lost['auto']} ({counts})"
    assert all(ERA_2026.match(s) for s in lost["legacy"]), (
        f"lost through toolwise (legacy): {lost['legacy']} ({counts})"
    )
