"""Group commit: one writer task drains a bounded queue and commits records in batches.

A batch is committed once `batch_size` records are in hand or `flush_interval_s` has passed since the
first; when more are already waiting (a backlog), up to `max_batch` go in one commit, so a burst pays
for few fsyncs. Preparing a batch (`prepare`, on the event loop) overlaps the commit of the one before
it (`write`, on the database's thread); one commit is in flight at a time, so order is kept.

Producers `await put()` and return as soon as the record is queued (they wait only when the queue is
full: back-pressure, never a drop). Queueing is an append: the writer wakes once per batch (a timer set
by the batch's first record, or the batch filling up), never per record, so the event loop serving
calls does almost no work for each one.

A failed batch is retried with capped exponential backoff while the failure looks transient (database
locked, connection lost). A connection lost during COMMIT may have lost only the answer: before each such
retry, the records `unstored` does not find in the database are all that is written again (the others
count as committed), so a retry never meets ids it stored itself. A batch that fails for another reason
is bisected so that one bad record cannot hold up the others, and a single record that still fails is
handed to `dead_letter` and logged as an error. Nothing leaves the queue unaccounted for.

A waiter that goes away (its request cancelled) never touches the writer: markers are awaited through
a shield and resolved only if still pending. While the database fails, `stats.failing` says why, and
producers wait for room or a flush at most `wait_s` before a `StoreUnavailableError` naming the
failure (a client gets an error it can read, not a hang). A close that cannot commit within its
bound dead-letters what is left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

from sqlalchemy.exc import DBAPIError, OperationalError

from toolwise.feedback.errors import DeadLetterError, StoreUnavailableError, describe_database_error
from toolwise.feedback.records import WriterStats, utcnow

T = TypeVar("T")
P = TypeVar("P")
log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Marker:
    """Queued behind records: resolved once everything ahead of it is committed."""

    done: asyncio.Future[None]
    stop: bool = False


def is_transient(exc: BaseException) -> bool:
    """Failures that go away by themselves: locks, lost connections, timeouts."""
    if isinstance(exc, OperationalError | TimeoutError | ConnectionError | OSError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


class GroupCommitWriter(Generic[T, P]):
    def __init__(
        self,
        prepare: Callable[[list[T]], P],
        write: Callable[[P], Awaitable[None]],
        dead_letter: Callable[[T, BaseException], None],
        unstored: Callable[[list[T]], Awaitable[list[T]]] | None = None,
        *,
        batch_size: int = 256,
        max_batch: int = 4096,
        flush_interval_s: float = 0.020,
        max_queue: int = 10_000,
        max_backoff_s: float = 2.0,
        poison_attempts: int = 3,
        wait_s: float = 10.0,
    ) -> None:
        if not 1 <= batch_size <= max_batch or max_queue < 1 or flush_interval_s < 0:
            raise ValueError(
                f"need 1 ≤ batch_size ≤ max_batch, max_queue ≥ 1 and flush_interval_s ≥ 0, "
                f"got {batch_size}, {max_batch}, {max_queue}, {flush_interval_s}"
            )
        self._prepare = prepare
        self._write = write
        self._dead_letter = dead_letter
        self._unstored = unstored
        self._batch_size = batch_size
        self._max_batch = max_batch
        self._interval = flush_interval_s
        self._max_backoff = max_backoff_s
        self._poison_attempts = poison_attempts
        self._max_queue = max_queue
        self._wait_s = wait_s
        self._pending: deque[T | _Marker] = deque()
        self._wake = asyncio.Event()  # set when a batch is due: full, timed out, or a marker queued
        self._space = asyncio.Event()  # set while the queue has room
        self._space.set()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._enqueued = self._committed = self._batches = self._failed = self._dead = 0
        self._failing: BaseException | None = None  # the last write's error, until a write succeeds
        self._failing_since: datetime | None = None
        self._in_hand: dict[int, list[T]] = {}  # batches taken from the queue, not yet committed

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="toolwise-feedback-writer")

    @property
    def stats(self) -> WriterStats:
        return WriterStats(
            enqueued=self._enqueued,
            committed=self._committed,
            queue_depth=self._waiting(),
            batches=self._batches,
            failed_batches=self._failed,
            dead_lettered=self._dead,
            failing=None if self._failing is None else describe_database_error(self._failing),
            failing_since=self._failing_since,
        )

    async def put(self, item: T, *, force: bool = False) -> None:
        """Queue a record; on a full queue wait for room, at most `wait_s` (and not at all while the
        database is failing: waiting would only hide it). `force` queues beyond the bound (shutdown)."""
        self._check_alive()
        deadline = time.monotonic() + self._wait_s
        while len(self._pending) >= self._max_queue and not force:
            left = deadline - time.monotonic()
            if self._failing is not None or left <= 0:
                raise self._unavailable(f"the queue is full ({self._waiting()} records waiting)")
            self._space.clear()
            try:  # asyncio.timeout, not wait_for: on 3.11 wait_for drops a cancellation that meets the result
                async with asyncio.timeout(left):
                    await self._space.wait()
            except TimeoutError:
                continue
            self._check_alive()
        self._pending.append(item)
        self._enqueued += 1
        if len(self._pending) >= self._batch_size:
            self._wake.set()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self._wake.set)

    async def flush(self) -> None:
        """Return once every record queued before this call is committed (or dead-lettered); raise
        `StoreUnavailableError` if that takes longer than `wait_s`."""
        marker = self._marker(stop=False)
        try:
            async with asyncio.timeout(self._wait_s):  # not wait_for, which on 3.11 can drop our cancellation
                await asyncio.shield(marker.done)
        except TimeoutError:
            raise self._unavailable(f"{self._waiting()} records are waiting to be committed") from None

    async def aclose(self, timeout_s: float | None = None) -> int:
        """Commit everything queued, then stop the writer task. If that takes longer than `timeout_s`
        (the database is failing), stop anyway and dead-letter what was not committed; how many went there."""
        if self._task is None or self._task.done():
            return 0
        marker = self._marker(stop=True)
        done, _ = await asyncio.wait([asyncio.shield(marker.done)], timeout=timeout_s)
        dead = self._dead
        if not done:
            log.error("the database did not take the last records within %g s; dead-lettering them", timeout_s)
            self._task.cancel()
            held = [item for batch in self._in_hand.values() for item in batch]
            left = [*held, *(i for i in self._pending if not isinstance(i, _Marker))]
            self._pending.clear()
            for item in left:
                self._give_up(item, self._failing or TimeoutError("shutdown"))
        await asyncio.wait([self._task])
        return self._dead - dead

    def _marker(self, *, stop: bool) -> _Marker:
        """Queue a marker (never refused: a flush must get through a full queue). Its waiters await
        it through a shield, so a waiter that is cancelled leaves it for the writer to resolve."""
        self._check_alive()
        marker = _Marker(asyncio.get_running_loop().create_future(), stop)
        self._pending.append(marker)
        self._wake.set()
        return marker

    def _waiting(self) -> int:
        """Records not committed yet: queued, and taken for a batch (markers count too: a handful)."""
        return len(self._pending) + sum(len(batch) for batch in self._in_hand.values())

    def _unavailable(self, what: str) -> StoreUnavailableError:
        failing = self._failing
        reason = f"the database is failing: {describe_database_error(failing)}" if failing else "the database is slow"
        return StoreUnavailableError(f"{reason}; {what}")

    def _check_alive(self) -> None:
        if self._task is None:
            raise RuntimeError("the writer was not started")
        if self._task.done():
            exc = self._task.exception() if not self._task.cancelled() else None
            raise RuntimeError("the feedback writer has stopped; records cannot be accepted") from exc

    async def _run(self) -> None:
        inflight: asyncio.Task[None] | None = None
        while True:
            batch, marker = await self._collect()
            if batch:
                prepared = self._try_prepare(batch)
                self._in_hand[id(batch)] = batch
                if inflight is not None:
                    await inflight
                inflight = asyncio.create_task(self._commit_held(batch, prepared))
            if marker is not None:
                if inflight is not None:
                    await inflight
                    inflight = None
                if not marker.done.done():
                    marker.done.set_result(None)
                if marker.stop:
                    return

    def _try_prepare(self, batch: list[T]) -> P | BaseException:
        try:
            return self._prepare(batch)
        except Exception as exc:  # noqa: BLE001 - handed to _commit, which isolates the bad record
            return exc

    async def _collect(self) -> tuple[list[T], _Marker | None]:
        """The next batch, once one is due: up to `max_batch` waiting records, ending early at a marker."""
        await self._wake.wait()
        self._wake.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch: list[T] = []
        marker: _Marker | None = None
        pending = self._pending
        while pending and len(batch) < self._max_batch:
            item = pending.popleft()
            if isinstance(item, _Marker):
                marker = item
                break
            batch.append(item)
        if pending:  # a backlog, or records behind the marker: the next batch is due at once
            self._wake.set()
        if len(pending) < self._max_queue:
            self._space.set()
        return batch, marker

    async def _commit_held(self, batch: list[T], prepared: P | BaseException) -> None:
        await self._commit(batch, prepared)
        del self._in_hand[id(batch)]

    async def _commit(self, batch: list[T], prepared: P | BaseException | None = None) -> None:
        if prepared is None:
            prepared = self._try_prepare(batch)
        if isinstance(prepared, BaseException):  # a record that cannot even be converted: no retry helps
            self._failed += 1
            log.warning("feedback batch of %d could not be prepared, isolating: %s", len(batch), prepared)
            await self._isolate(batch, prepared)
            return
        backoff, attempts, transient = 0.01, 0, False
        while True:
            try:
                if transient and (unstored := self._unstored) is not None:  # the last try may have committed
                    prepared = await self._left_to_write(unstored, batch, prepared)
                if batch:
                    await self._write(prepared)
            except Exception as exc:  # noqa: BLE001 - every failure is retried, bisected or dead-lettered
                self._failed += 1
                attempts += 1
                transient = is_transient(exc)
                if self._failing is None:
                    self._failing_since = utcnow()
                self._failing = exc
                log.warning(
                    "feedback batch of %d failed (attempt %d, %s): %s",
                    len(batch),
                    attempts,
                    "retrying" if transient else "isolating",
                    exc,
                )
                if transient or attempts < self._poison_attempts:
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, self._max_backoff)
                    continue
                await self._isolate(batch, exc)
                return
            if self._failing is not None:
                log.warning("the database accepts records again (failing since %s)", self._failing_since)
            self._failing = self._failing_since = None
            self._committed += len(batch)
            self._batches += 1
            return

    async def _left_to_write(self, unstored: Callable[[list[T]], Awaitable[list[T]]], batch: list[T], prepared: P) -> P:
        """Take out of `batch` (in place: it is what a shutdown would dead-letter) the records the database
        holds already, counted as committed; the prepared batch of the rest."""
        left = await unstored(batch)
        if len(left) == len(batch):
            return prepared
        log.warning("%d records of a batch whose commit failed were stored all the same", len(batch) - len(left))
        self._committed += len(batch) - len(left)
        batch[:] = left
        return self._prepare(left) if left else prepared

    async def _isolate(self, batch: list[T], exc: BaseException) -> None:
        if len(batch) > 1:
            mid = len(batch) // 2
            await self._commit(batch[:mid])
            await self._commit(batch[mid:])
            return
        self._give_up(batch[0], exc)

    def _give_up(self, item: T, exc: BaseException) -> None:
        """Dead-letter a record the database refused; if even that fails (every disk it may go to is
        full), the record goes to the log, so it is never lost without a trace."""
        log.error("feedback record could not be written to the database, dead-lettering it: %s", exc)
        try:
            self._dead_letter(item, exc)
        except DeadLetterError as lost:  # its message names the record as it would have been stored
            log.error("feedback record lost, it is only in this log: %s", lost)  # noqa: TRY400 - its message is all
            return
        except Exception:
            log.exception("dead-lettering failed too; the record is only in this log: %r", item)
            return
        self._dead += 1
