"""While a start loads its learned state, a recommendation answers from the prior however many calls
wait to be learned into the state being loaded: they cannot be learned before it is, so a recommendation
that waited for them would wait for the whole load. In-process through `Client(server)` with a real
downstream and a real SQLite file; the snapshot's decoding is held until the test lets it go."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from jsonschema.validators import Draft202012Validator

from tests.learning.test_startup import HOLD_S, first_run, hold_decoding, serving_policy
from tests.server.surface import ok, rows, running, text
from toolwise.rl import Learner
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


class HeldListing:
    """`Learner.set_tools` that, for the first catalogue (listed before its documents are embedded: `later`),
    waits to be let go, as listing a large catalogue keeps its thread busy (docs/benchmarks.md)."""

    def __init__(self, set_tools: Any) -> None:
        self.set_tools = set_tools
        self.started, self.release = threading.Event(), threading.Event()
        self.events: list[str] = []

    def __call__(self, learner: Learner, tools: Any, vectors: Any = None, later: Any = ()) -> None:
        if later and not self.release.is_set():
            self.events.append("listing started")
            self.started.set()
            self.release.wait(HOLD_S)  # bounded: listed on the event loop, it holds the loop this long
            self.events.append("listed")
        self.set_tools(learner, tools, vectors, later)


async def test_a_start_serves_while_its_first_catalogue_is_listed_and_recommends_from_all_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A start without a seed lists the first catalogue beside the event loop: the client's handshake and
    tools/list are answered meanwhile; a recommendation asked meanwhile waits for it and ranks every tool."""
    held = HeldListing(Learner.set_tools)

    def set_tools(learner: Learner, tools: Any, vectors: Any = None, later: Any = ()) -> None:
        held(learner, tools, vectors, later)

    monkeypatch.setattr(Learner, "set_tools", set_tools)
    async with running(tmp_path, seed=None) as (app, client):
        await asyncio.to_thread(held.started.wait, HOLD_S)
        names = [t.name for t in (await client.list_tools()).tools]
        held.events.append("served")
        recommending = asyncio.create_task(client.call_tool("recommend_tool", {"query": "say hello back", "top_k": 50}))
        await asyncio.sleep(0.05)
        held.release.set()
        recommended = ok(await recommending)
        held.events.append("recommend_tool answered")
        listed = app.learning.learner.index.active_names
    assert held.events == ["listing started", "served", "listed", "recommend_tool answered"]
    downstream = [name for name in names if name.startswith("toy__")]
    assert sorted(r["tool"] for r in recommended["recommendations"]) == sorted(downstream) == sorted(listed)


async def test_a_start_checks_no_input_schema_before_a_call_of_its_tool_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checking every tool's input schema against the metaschema held the event loop at a start, before any
    answer (docs/benchmarks.md): a tool's schema is checked at its first call, whose arguments are checked
    against it all the same."""
    checked: list[Any] = []
    check_schema = Draft202012Validator.check_schema

    def counted(cls: type[Draft202012Validator], schema: Any, *args: Any, **kwargs: Any) -> None:
        checked.append(schema)
        check_schema.__func__(cls, schema, *args, **kwargs)  # type: ignore[attr-defined]  # a classmethod's function

    monkeypatch.setattr(Draft202012Validator, "check_schema", classmethod(counted))
    async with running(tmp_path) as (app, client):
        assert checked == [], f"{len(checked)} schemas checked at the start"
        refused = await client.call_tool("toy__echo", {"text": 5})
        ok(await client.call_tool("toy__echo", {"text": "hello"}))
    assert refused.is_error and "not of type 'string'" in text(refused)
    assert checked == [app.catalogue.routes["toy__echo"].public.input_schema], "one check, at the first call"
