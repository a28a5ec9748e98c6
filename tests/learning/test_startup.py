"""A start with a snapshot answers before its learned state is loaded: tools/list, recommend_tool (from
the prior, and the stats say so) and proxied calls, which are then learned into the loaded state, not
lost with the empty one it replaces. In-process through `Client(server)` with a real downstream and a
real SQLite file; the snapshot's decoding is held until the test lets it go."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.server.surface import ok, rows, running
from toolwise.learning.snapshotting import Snapshotting

HOLD_S = 20.0  # the longest the snapshot's decoding is held: a start that waits for it fails the test


async def first_run(tmp_path: Path, calls: int) -> None:
    """A run that learns `calls` calls and leaves its shutdown snapshot."""
    async with running(tmp_path) as (app, client):
        await app.learning.until_loaded()
        for i in range(calls):
            ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
            ok(await client.call_tool("toy__echo", {"text": f"hello {i}"}))


class HeldDecode:
    """`Snapshotting._prepare` that waits to be let go before decoding."""

    def __init__(self, prepare: Any) -> None:
        self.prepare = prepare
        self.started = threading.Event()
        self.release = threading.Event()
        self.events: list[str] = []

    def __call__(self, snapshotting: Snapshotting, record: Any) -> Any:
        self.events.append("decode started")
        self.started.set()
        self.release.wait(HOLD_S)
        self.events.append("decode done")
        return self.prepare(snapshotting, record)


def hold_decoding(monkeypatch: pytest.MonkeyPatch) -> HeldDecode:
    held = HeldDecode(Snapshotting._prepare)

    def prepare(snapshotting: Snapshotting, record: Any) -> Any:
        return held(snapshotting, record)

    monkeypatch.setattr(Snapshotting, "_prepare", prepare)
    return held


async def serving_policy(client: Client) -> str:
    """What answers recommend_tool once the learned state is loaded and the log after it learned."""
    for _ in range(400):
        serving = ok(await client.call_tool("get_learning_stats", {}))["serving"]
        if "catching up" not in serving:
            return str(serving)
        await asyncio.sleep(0.05)
    raise TimeoutError("toolwise did not finish loading its learned state")


async def test_a_start_with_a_snapshot_answers_from_the_prior_while_the_state_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await first_run(tmp_path, calls=3)
    held = hold_decoding(monkeypatch)
    async with running(tmp_path, seed=None) as (app, client):  # a seed waits, so that decisions replay (below)
        await asyncio.to_thread(held.started.wait, HOLD_S)
        listed = {t.name for t in (await client.list_tools()).tools}
        held.events.append("tools/list answered")
        recommended = ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        held.events.append("recommend_tool answered")
        stats = ok(await client.call_tool("get_learning_stats", {}))
        echoed = ok(await client.call_tool("toy__echo", {"text": "while loading"}))
        held.events.append("proxied call answered")
        held.release.set()
        policy = await serving_policy(client)
        learned = ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        updates = app.learning.learner.updates
    assert held.events == [
        "decode started",
        "tools/list answered",
        "recommend_tool answered",
        "proxied call answered",
        "decode done",
    ]
    assert {"toy__echo", "recommend_tool"} <= listed
    assert recommended["policy"] == "baseline"  # the prior, said as such
    assert "catching up: loading the learned state" in stats["serving"]
    assert echoed == {"server": "toy"}
    assert learned["policy"] == policy != "baseline"
    assert updates == 4  # the snapshot's 3 calls and the one made while it loaded, learned into it
    assert rows(tmp_path, "SELECT count(*) FROM executions") == [(4,)]  # recorded, none lost


async def test_under_a_seed_a_recommendation_waits_for_the_start_to_catch_up_and_decides_as_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seed makes decisions replay exactly: a recommendation asked while the start loads its learned state (and
    learns the log after it) waits for that, as it waits for the calls made before it, and decides as once the start
    is done, not from the prior. Else a seeded run's first decisions fell before or after the start's catch-up as the
    machine's timing had it, and its learned state (the decisions counted) differed (docs/benchmarks.md)."""
    await first_run(tmp_path / "settled", calls=2)
    shutil.copytree(tmp_path / "settled", tmp_path / "raced")
    async with running(tmp_path / "settled") as (_, client):
        await serving_policy(client)
        settled = ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
    held = hold_decoding(monkeypatch)
    async with running(tmp_path / "raced") as (_, client):
        await asyncio.to_thread(held.started.wait, HOLD_S)
        asked = asyncio.create_task(client.call_tool("recommend_tool", {"query": "say hello back"}))
        await asyncio.sleep(0.2)
        held.events.append("recommend_tool answered" if asked.done() else "recommend_tool waits")
        held.release.set()
        raced = ok(await asked)
    assert held.events == ["decode started", "recommend_tool waits", "decode done"]
    assert raced["policy"] == settled["policy"] != "baseline"
    for answer in (raced, settled):  # drawn per run (the decision) and per connection (the session)
        del answer["decision_id"], answer["session_id"]
    assert raced == settled


async def test_a_server_stopped_before_its_state_loaded_keeps_the_snapshot_it_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await first_run(tmp_path, calls=2)
    held = hold_decoding(monkeypatch)
    async with running(tmp_path) as (_app, client):
        await asyncio.to_thread(held.started.wait, HOLD_S)
        ok(await client.call_tool("toy__echo", {"text": "before it loaded"}))
    held.release.set()
    # No empty state stored as the newest: the next start loads the first run's snapshot and learns
    # the call made meanwhile from the log.
    assert rows(tmp_path, "SELECT source, sample_count FROM snapshots ORDER BY id") == [("shutdown", 2)]
    assert rows(tmp_path, "SELECT count(*) FROM executions") == [(3,)]
    monkeypatch.undo()
    async with running(tmp_path) as (app, client):
        await serving_policy(client)
        assert app.learning.learner.updates == 3
