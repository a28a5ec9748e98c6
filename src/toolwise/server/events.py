"""SSE resumability on streamable HTTP: the recent events of each stream, so that a client whose
stream broke reconnects with `Last-Event-ID` and gets what it missed (spec: Resumability and
Redelivery). Bounded in memory: the newest events of the newest streams, nothing else."""

from __future__ import annotations

from collections import OrderedDict, deque

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

STREAMS = 1024  # streams remembered (the least recently written are forgotten first)
EVENTS_PER_STREAM = 256  # events remembered per stream
RETRY_MS = 1000  # the `retry` toolwise suggests to SSE clients (ms before reconnecting)


class MemoryEventStore(EventStore):
    def __init__(self, streams: int = STREAMS, per_stream: int = EVENTS_PER_STREAM) -> None:
        self._streams = streams
        self._per_stream = per_stream
        self._events: OrderedDict[StreamId, deque[tuple[int, JSONRPCMessage | None]]] = OrderedDict()
        self._next = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        events = self._events.get(stream_id)
        if events is None:
            events = self._events[stream_id] = deque(maxlen=self._per_stream)
            if len(self._events) > self._streams:
                self._events.popitem(last=False)
        else:
            self._events.move_to_end(stream_id)
        self._next += 1
        events.append((self._next, message))
        return f"{stream_id}:{self._next}"

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the stream's events after `last_event_id`; None when that stream is not (or no longer)
        known, and the SDK then tells the client so."""
        stream_id, _, number = last_event_id.rpartition(":")
        events = self._events.get(stream_id)
        if events is None or not number.isdigit():
            return None
        after = int(number)
        for n, message in list(events):
            if n > after and message is not None:
                await send_callback(EventMessage(message, f"{stream_id}:{n}"))
        return stream_id
