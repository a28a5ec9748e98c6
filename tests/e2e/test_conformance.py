"""The MCP conformance suite's server scenarios against a server directly and behind toolwise
(`prefix: ""`): every scenario that passes directly passes through toolwise.

- Our handshake-era server (`conformance_server.py`): the pinned suite (0.1.16) with it as a stdio
  downstream behind toolwise, the newest prerelease (0.2.0-alpha.12) with it as an HTTP downstream
  (its `test_reconnection` answers only a client that resumes the stream it closed).
- The newest prerelease against its own reference server (`reference/`, TypeScript, both protocol
  eras, an HTTP downstream), through toolwise in both modes: `auto` equals direct; `legacy` (the
  handshake and nothing else) equals direct on the handshake era's spec, and on the whole suite loses
  only the scenarios of the 2026-07-28 path, which that server serves only to a 2026-07-28 connection."""

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
HANDSHAKE_SPEC = "2025-11-25"  # the newest spec of the handshake era, the one `mode: legacy` speaks
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


async def run_suite(node: str, suite: Path, url: str, spec: str | None = None) -> dict[str, bool]:
    """Every server scenario (`--suite all`), or those of one spec version: scenario → passed (no
    failed check)."""
    only = ["--spec-version", spec] if spec else []
    proc = await asyncio.create_subprocess_exec(
        node, str(suite), "server", "--url", url, "--suite", "all", *only,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), timeout=300)
    results = {m["scenario"]: m["failed"] == "0" for m in LINE.finditer(out.decode())}
    assert results, out.decode()[-3000:]
    return results


@pytest.mark.parametrize(
    ("suite", "transport"), [(CONFORMANCE, "stdio"), (CONFORMANCE_PRERELEASE, "http")], ids=["pinned", "prerelease"]
)
async def test_every_scenario_that_passes_directly_passes_through_toolwise(
    tmp_path: Path, suite: Path, transport: str
) -> None:
    """The pinned suite with our server as a stdio downstream; the prerelease with the same server as
    an HTTP downstream, whose `test_reconnection` closes the call's stream (server-sse-polling): the
    call answers through toolwise only if toolwise resumes the downstream stream."""
    node = node_for(suite)
    config = tmp_path / "config.json"

    async def through_toolwise(direct_url: str) -> dict[str, bool]:
        stdio = {"command": sys.executable, "args": [str(SERVER)], "prefix": ""}
        downstream = stdio if transport == "stdio" else {"url": direct_url, "prefix": ""}
        # the scenarios and their server are of the handshake era (server→client requests mid-call)
        settings = {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'tw.db'}", "mode": "legacy"}
        config.write_text(json.dumps({"mcpServers": {"everything": downstream}, "toolwise": settings}))
        async with toolwise_http(config) as url:
            return await run_suite(node, suite, url.replace("127.0.0.1", "localhost"))

    async with conformance_server() as direct_url:  # two suites side by side
        direct, proxied = await asyncio.gather(run_suite(node, suite, direct_url), through_toolwise(direct_url))
    counts = f"direct {sum(direct.values())}/{len(direct)}, through toolwise {sum(proxied.values())}/{len(proxied)}"
    print(f"conformance scenarios passed ({transport} downstream): {counts}")
    lost = sorted(s for s, ok in direct.items() if ok and not proxied.get(s))
    assert not lost, f"pass directly but not through toolwise: {lost} ({counts})"
    assert len(direct) >= 30 and sum(direct.values()) >= 30, counts


@pytest.mark.timeout(240)  # four suites against a TypeScript server started by tsx: past 90 s at load 12
async def test_the_newest_prerelease_passes_through_toolwise_in_both_modes_as_against_its_reference_server(
    tmp_path: Path,
) -> None:
    """`auto` equals direct on every scenario. `legacy` speaks the handshake era only, so it equals
    direct on every scenario of that era's spec (2025-11-25), and on the whole suite it loses only
    what the server serves on its 2026-07-28 path alone."""
    node = node_for(CONFORMANCE_PRERELEASE)
    node_for(TSX)

    async def through_toolwise(mode: str, reference: str, spec: str | None = None) -> dict[str, bool]:
        name = f"{mode}-{spec or 'all'}"
        config = tmp_path / f"{name}.json"
        database = f"sqlite+aiosqlite:///{tmp_path / (name + '.db')}"
        servers = {"everything": {"url": reference, "prefix": ""}}
        config.write_text(json.dumps({"mcpServers": servers, "toolwise": {"database_url": database, "mode": mode}}))
        async with toolwise_http(config) as url:
            return await run_suite(node, CONFORMANCE_PRERELEASE, url.replace("127.0.0.1", "localhost"), spec)

    async with reference_server(node, tmp_path / "reference.log") as reference:
        direct, direct_2025 = await asyncio.gather(
            run_suite(node, CONFORMANCE_PRERELEASE, reference),
            run_suite(node, CONFORMANCE_PRERELEASE, reference, HANDSHAKE_SPEC),
        )
        auto, legacy, legacy_2025 = await asyncio.gather(
            through_toolwise("auto", reference),
            through_toolwise("legacy", reference),
            through_toolwise("legacy", reference, HANDSHAKE_SPEC),
        )
    runs = {"direct": direct, f"direct {HANDSHAKE_SPEC}": direct_2025, "auto": auto, "legacy": legacy}
    runs[f"legacy {HANDSHAKE_SPEC}"] = legacy_2025
    counts = ", ".join(f"{name} {sum(r.values())}/{len(r)}" for name, r in runs.items())
    print(f"conformance scenarios passed against the reference server: {counts}")

    def lost(baseline: dict[str, bool], proxied: dict[str, bool]) -> list[str]:
        return sorted(s for s, ok in baseline.items() if ok and not proxied.get(s))

    assert sum(direct.values()) >= 50 and sum(direct_2025.values()) >= 30, counts
    assert lost(direct, auto) == [], f"pass directly but not through toolwise (auto): {lost(direct, auto)} ({counts})"
    assert lost(direct_2025, legacy_2025) == [], f"lost in legacy, {HANDSHAKE_SPEC}: {lost(direct_2025, legacy_2025)}"
    assert all(ERA_2026.match(s) for s in lost(direct, legacy)), f"lost (legacy): {lost(direct, legacy)} ({counts})"
