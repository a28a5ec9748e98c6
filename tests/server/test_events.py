"""SSE resumability: a client that reconnects with Last-Event-ID gets what it missed, from a store
that stays bounded."""

from __future__ import annotations

import mcp_types as types
from mcp.server.streamable_http import EventMessage

from toolwise.server.events import MemoryEventStore


def note(n: int) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/progress", params={"n": n})


async def test_a_reconnecting_client_gets_the_events_after_its_last_one() -> None:
    store = MemoryEventStore()
    await store.store_event("s", None)  # the priming event carries no message
    ids = [await store.store_event("s", note(n)) for n in range(3)]
    await store.store_event("other", note(9))
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    assert await store.replay_events_after(ids[0], send) == "s"
    assert [getattr(e.message, "params", None) for e in got] == [{"n": 1}, {"n": 2}]
    assert [e.event_id for e in got] == ids[1:]
    assert await store.replay_events_after("unknown:1", send) is None


async def test_the_store_keeps_only_the_newest_events_of_the_newest_streams() -> None:
    store = MemoryEventStore(streams=2, per_stream=3)
    first = await store.store_event("a", note(0))
    for n in range(5):
        await store.store_event("a", note(n))
    await store.store_event("b", note(0))
    await store.store_event("c", note(0))  # "a" is now the least recently written: forgotten
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    assert await store.replay_events_after(first, send) is None
    assert await store.replay_events_after("b:0", send) == "b" and len(got) == 1
