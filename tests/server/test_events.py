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


def big(n: int, size: int) -> types.JSONRPCNotification:
    return types.JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n, "data": "x" * size})


async def test_large_events_are_bounded_by_bytes_the_oldest_forgotten_first() -> None:
    store = MemoryEventStore(max_bytes=350_000)  # room for three events of 100 KB, not for the count limits
    old = await store.store_event("old", big(0, 100_000))
    first = await store.store_event("s", None)
    for n in range(10):
        await store.store_event("s", big(n, 100_000))
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    assert await store.replay_events_after(old, send) is None  # the least recently written stream went first
    assert await store.replay_events_after(first, send) == "s"
    assert [getattr(e.message, "params", {})["n"] for e in got] == [7, 8, 9]  # then the stream's oldest events


async def test_an_event_larger_than_the_bound_is_still_kept_alone() -> None:
    store = MemoryEventStore(max_bytes=1_000)
    first = await store.store_event("s", note(0))
    await store.store_event("s", big(1, 5_000))
    got: list[EventMessage] = []

    async def send(event: EventMessage) -> None:
        got.append(event)

    assert await store.replay_events_after(first, send) == "s"
    assert [getattr(e.message, "params", {})["n"] for e in got] == [1]
