"""While a start loads its learned state, a recommendation answers from the prior however many calls
wait to be learned into the state being loaded: they cannot be learned before it is, so a recommendation
that waited for them would wait for the whole load. In-process through `Client(server)` with a real
downstream and a real SQLite file; the snapshot's decoding is held until the test lets it go."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.learning.test_startup import HOLD_S, first_run, hold_decoding, serving_policy
from tests.server.surface import ok, rows, running
from toolwise.server.handlers import STALE_CALLS


async def test_a_recommendation_past_the_staleness_bound_does_not_wait_for_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await first_run(tmp_path, calls=2)
    held = hold_decoding(monkeypatch)
    async with running(tmp_path, seed=None) as (app, client):  # a seed drains before every decision, to replay
        await asyncio.to_thread(held.started.wait, HOLD_S)
        for i in range(STALE_CALLS + 1):
            ok(await client.call_tool("toy__echo", {"text": f"while loading {i}"}))
        assert app.learning.pending > STALE_CALLS
        recommended = ok(await client.call_tool("recommend_tool", {"query": "say hello back"}))
        held.events.append("recommend_tool answered")
        held.release.set()
        await serving_policy(client)
        updates = app.learning.learner.updates
    assert held.events == ["decode started", "recommend_tool answered", "decode done"]
    assert recommended["policy"] == "baseline"  # the prior, said as such
    assert updates == 2 + STALE_CALLS + 1  # the calls that waited, learned into the loaded state
    assert rows(tmp_path, "SELECT count(*) FROM executions") == [(2 + STALE_CALLS + 1,)]
