"""A snapshot is packed off the event loop: calls are served while a year's state is packed, and what is
learned meanwhile is neither in that snapshot nor lost from the next one. In-process through
`Client(server)` with a real downstream and a real SQLite file."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.server.surface import ok, rows, running
from toolwise.learning import snapshotting
from toolwise.rl.state import pack

PACK_WAIT_S = 20.0  # a pack held on the event loop would block every call this long, then the test fails


class HeldPack:
    """`pack` that tells when it started and waits to be let go (from the test, on the event loop)."""

    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.started = threading.Event()
        self.release = threading.Event()

    def __call__(self, state: Any, *, deflate: bool = True) -> bytes:
        self.events.append("pack started")
        self.started.set()
        self.release.wait(PACK_WAIT_S)
        self.events.append("pack done")
        return pack(state, deflate=deflate)


async def test_calls_are_answered_while_a_periodic_snapshot_is_packed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    held = HeldPack(events)
    monkeypatch.setattr(snapshotting, "pack", held)
    async with running(tmp_path) as (app, client):
        ok(await client.call_tool("toy__echo", {"text": "before"}))
        saving = asyncio.create_task(app.snapshots.save("periodic"))
        await asyncio.to_thread(held.started.wait, PACK_WAIT_S)
        assert not saving.done()
        ok(await client.call_tool("toy__echo", {"text": "during"}))
        events.append("proxied call answered")
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        events.append("recommend_tool answered")
        held.release.set()
        record = await saving
        assert events == ["pack started", "proxied call answered", "recommend_tool answered", "pack done"]
        assert record.sample_count == 1  # the state as it was taken: the call made during the pack is not in it
        assert app.learning.learner.updates == 2
        assert app.learning.state.unsnapshotted == 1  # learned during the pack: the next snapshot still counts it
    assert rows(tmp_path, "SELECT source FROM snapshots ORDER BY id") == [("periodic",), ("shutdown",)]


async def test_a_captured_state_does_not_change_while_the_learner_goes_on(tmp_path: Path) -> None:
    async with running(tmp_path) as (app, client):
        ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        ok(await client.call_tool("toy__echo", {"text": "one"}))
        await app.learning.drain()
        captured = app.snapshots._capture("periodic")
        packed = pack(captured.state)
        for i in range(5):
            ok(await client.call_tool("recommend_tool", {"query": f"say hello {i}"}))
            ok(await client.call_tool("toy__echo", {"text": f"again {i}"}))
        await app.learning.drain()
        assert app.learning.learner.updates == 6
        assert pack(app.snapshots._capture("periodic").state) != packed  # the learner did change
        assert pack(captured.state) == packed  # the copy taken before did not
