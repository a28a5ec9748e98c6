"""SSE resumability on streamable HTTP: the recent events of each stream, so that a client whose
stream broke reconnects with `Last-Event-ID` and gets what it missed (spec: Resumability and
Redelivery). Bounded in memory, by count and by bytes: the newest events of the newest streams,
nothing else."""

from __future__ import annotations

from collections import OrderedDict, deque

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

STREAMS = 1024  # streams remembered (the least recently written are forgotten first)
EVENTS_PER_STREAM = 256  # events remembered per stream
MAX_BYTES = 64 << 20  # the JSON of all remembered events together (large tool results fill it first)
RETRY_MS = 1000  # the `retry` toolwise suggests to SSE clients (ms before reconnecting)


class MemoryEventStore(EventStore):
    def __init__(self, streams: int = STREAMS, per_stream: int = EVENTS_PER_STREAM, max_bytes: int = MAX_BYTES) -> None:
        self._streams = streams
        self._per_stream = per_stream
        self._max_bytes = max_bytes
        self._events: OrderedDict[StreamId, deque[tuple[int, JSONRPCMessage | None, int]]] = OrderedDict()
        self._bytes = 0  # the JSON sizes of every event held
        self._next = 0

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        events = self._events.get(stream_id)
        if events is None:
            events = self._events[stream_id] = deque()
            if len(self._events) > self._streams:
                _, forgotten = self._events.popitem(last=False)
                self._bytes -= sum(size for _, _, size in forgotten)
        else:
            self._events.move_to_end(stream_id)
        self._next += 1
        size = 0 if message is None else len(message.__pydantic_serializer__.to_json(message, by_alias=True))
        events.append((self._next, message, size))
        self._bytes += size
        if len(events) > self._per_stream:
            self._bytes -= events.popleft()[2]
        self._evict()
        return f"{stream_id}:{self._next}"

    def _evict(self) -> None:
        """Past max_bytes, forget the oldest events of the least recently written streams; the event
        just stored stays, however large (a stream then resumes from it)."""
        while self._bytes > self._max_bytes:
            stream_id, events = next(iter(self._events.items()))
            if len(self._events) == 1 and len(events) == 1:
                return
            self._bytes -= events.popleft()[2]
            if not events:
                del self._events[stream_id]

    async def replay_events_after(self, last_event_id: EventId, send_callback: EventCallback) -> StreamId | None:
        """Send the stream's events after `last_event_id`; None when that stream is not (or no longer)
        known, and the SDK then tells the client so."""
        stream_id, _, number = last_event_id.rpartition(":")
        events = self._events.get(stream_id)
        if events is None or not number.isdigit():
            return None
        after = int(number)
        for n, message, _ in list(events):
            if n > after and message is not None:
                await send_callback(EventMessage(message, f"{stream_id}:{n}"))
        return stream_id
