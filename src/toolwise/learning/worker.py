"""The thread learning runs on, beside the event loop.

A learning step takes about a millisecond (the choice model's step and its replays); run on the event
loop it delayed every call waiting on the loop by as much, and with several callers the delays added
up in the tail. Here the event loop hands the calls pending to one worker thread at once (each hand-over
costs both threads a round trip) and goes on serving; the worker learns them in call order. The learned
state is changed by the worker and read for the loop, so both hold `lock` while they touch it: the worker
for its work, letting a blocked reader in between chunks of a few calls (`let_readers_in`), a reader for
one read (a recommendation, a rating, the statistics, a snapshot's state: `read`). A read never blocks the
event loop on the lock: when it is free the loop takes it and reads at once; when the worker holds it, the
read goes to the reader thread (`Readers`), which blocks on the lock there, counted among the waiting, and
every read asked meanwhile is done under one hold of it. A reader waits for a few calls' learning at most
while learning keeps up, never for every call pending; while it catches up, runs of up to `CATCH_UP_RUN` calls
(learning/service.py: tens of milliseconds at 1,000 tools) hold the lock, and a recommendation does not wait for
the run: it is asked `midway`, and the worker does it itself at the run's next break, between two minibatch
steps (`answer_midway`: the model whole, the run part-learned); so it does between the minibatch steps of a
batch of a start-up's replay of the log (learning/sharing.py's `REPLAY_BATCH` entries learned at once). What copies
the state or changes the model (a snapshot's copy, a rating) waits for the run's or batch's end: its calls are
marked learned only then. The loop serves calls meanwhile. A proxied call never takes it (a trace's reward reads
a tool's mean latency without it, `Learner.reward_of`).

The two threads still share the GIL. A thread that wants it is woken when the holder drops it (numpy does
around its C loops, and the loop often gets in then); otherwise the holder is made to drop it only once the
waiter has waited the switch interval (5 ms), and a drop the holder takes straight back starts that wait
again: through a stretch of the worker's Python the event loop waited 5 ms. So the worker gives the loop a
turn between learning steps, once every `SLICE_S` of work: it waits (without the GIL) until the loop has run a
callback it posted, or `TURN_S`; a loop that wanted the GIL takes it then, whatever it had to do is done, and
the worker goes on. A shorter switch interval does not do this: both threads trade the GIL that much more
often (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from types import TracebackType
from typing import Any, TypeVar, cast

T = TypeVar("T")

log = logging.getLogger(__name__)

SLICE_S = 0.0005  # the worker's learning between two turns of the event loop (s): about one step
TURN_S = 0.001  # a turn waits this long at most for the loop to run (s): a loop busy or blocked goes on without it
HAND_S = 0.00005  # the worker's sleep while a reader it let go of the lock for takes it (s)
LEARN_CHUNK = 4  # steps learned one at a time between two looks for a blocked reader (`let_readers_in`)
READER_S = 0.01  # how long the worker waits at most for a reader it let go of the lock for to take it (s)


class StateLock:
    """The learned state's lock (`threading.Lock`'s `with`), counting the threads blocked on it (the worker lets
    them in between chunks) and knowing which: an event loop blocked here cannot take a turn, so the worker,
    which holds it for a chunk, does not wait for one; a reader thread blocked here does not stop the loop's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = threading.Lock()  # guards `waiting` (readers may come from more than one thread)
        self.waiting = 0
        self._blocked: set[int] = set()  # the idents of the threads counted in `waiting`

    def blocks(self, thread: int | None) -> bool:
        """Whether the thread of ident `thread` is blocked on the lock now."""
        return thread in self._blocked

    def take(self) -> bool:
        """The lock if it is free now (then True: give it back with `__exit__`), without waiting."""
        return self._lock.acquire(blocking=False)

    def __enter__(self) -> None:
        if self._lock.acquire(blocking=False):
            return
        me = threading.get_ident()
        with self._count:
            self.waiting += 1
            self._blocked.add(me)
        try:
            self._lock.acquire()
        finally:
            with self._count:
                self.waiting -= 1
                self._blocked.discard(me)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._lock.release()


Ask = tuple[Future[object], Callable[[], object]]


class Readers:
    """The thread that reads the learned state for the event loop while the lock is held elsewhere (`read`).
    Not the learning thread: a read queued there would wait for the whole hand-over before it. Blocked on
    the lock here, it is counted among the waiting, so the worker lets it in after its chunk; every read
    asked by then is done under that one hold, so concurrent readers wait for one chunk, not one each."""

    def __init__(self, lock: StateLock) -> None:
        self._lock = lock
        self._asks: queue.SimpleQueue[Ask | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None  # started by the first read that needs it

    def ask(self, work: Callable[[], T]) -> Future[T]:
        """`work()` on the reader thread, holding the lock; a future cancelled before it starts skips it."""
        future: Future[T] = Future()
        self._asks.put((cast(Future[object], future), work))
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name="toolwise-reader", daemon=True)
            self._thread.start()
        return future

    def _serve(self) -> None:
        while (first := self._asks.get()) is not None:
            with self._lock:
                asks = [first, *(self._asks.get_nowait() for _ in range(self._asks.qsize()))]  # one consumer
                answers = [answer for ask in asks if ask is not None and (answer := _done(*ask)) is not None]
            for answer in answers:  # once the lock is let go: the loop a result wakes finds it free (a drain takes it)
                answer()
            if None in asks:
                return

    def close(self) -> None:
        """Answer the reads asked, then end the thread."""
        if self._thread is not None:
            self._asks.put(None)
            self._thread.join()
            self._thread = None


_claims = threading.Lock()  # a midway read may be done by the reader thread or the worker: by the first to claim it


def _claim(future: Future[object]) -> bool:
    """Whether this thread does the read: not if its caller went away before it started (cancelled), nor once the
    other thread that may do it (a midway read: `LearningThread.answer_midway`) has taken it."""
    with _claims:
        return not (future.running() or future.done()) and future.set_running_or_notify_cancel()


def _done(future: Future[object], work: Callable[[], object]) -> Callable[[], None] | None:
    """`work()` if this thread claims it (`_claim`), and what hands its result or error to the awaiting task."""
    if not _claim(future):  # its caller went away before it started, or it was done midway: nothing to do
        return None
    try:
        return partial(future.set_result, work())
    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, as an executor does
        return partial(future.set_exception, exc)


class LearningThread:
    def __init__(self) -> None:
        self.lock = StateLock()  # held while the learned state changes, or is read
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolwise-learning")
        self._readers = Readers(self.lock)
        self._reading = 0  # the event loop's reads handed to the reader thread and not yet back
        self._loop: asyncio.AbstractEventLoop | None = None  # the loop that handed the work over
        self._loop_thread: int | None = None  # its thread's ident
        self._worker: int | None = None  # the worker thread's ident, once it ran work
        self._since = 0.0  # when the loop last had its turn (perf_counter s)
        self._turned = threading.Event()
        self._closed = False
        self._handed: set[asyncio.Future[Any]] = set()  # `hand_over`'s work, held until it is back (weak in a loop)
        self._midway: deque[Ask] = deque()  # reads the worker may do between the parts of a run (`answer_midway`)

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` on the learning thread, holding the lock, after the work handed over before it
        (one thread: in order). Cancelling the caller does not stop work that started: it runs to its
        end, and what it learned stays learned. Once the thread is closed (a shutdown's last sync, after
        the calls' last drain) nothing learns beside it any more: on the loop, holding the lock."""
        if self._closed:
            with self.lock:
                return work()
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        return await self._loop.run_in_executor(self._executor, self._locked, work)

    async def hand_over(self, work: Callable[[], T], after: Callable[[T], None]) -> T:
        """`run(work)`, then `after(result)` on the event loop (what the loop alone touches: shields, counters),
        both done whether or not the caller is cancelled meanwhile (`run` alone may skip work not started yet
        and `after` with it): work that learns and marks what it learned in one piece ends whole, and what the
        loop counts of it is counted. A failure nobody awaits any more is logged."""
        handed = asyncio.ensure_future(self.run(work))
        self._handed.add(handed)
        handed.add_done_callback(partial(self._returned, after))  # before the caller resumes: added first
        try:
            return await asyncio.shield(handed)
        except asyncio.CancelledError:
            handed.add_done_callback(_unheard)
            raise

    def _returned(self, after: Callable[[T], None], handed: asyncio.Future[T]) -> None:
        self._handed.discard(handed)
        if not handed.cancelled() and handed.exception() is None:
            after(handed.result())

    async def read(self, work: Callable[[], T], *, beside: bool = False, midway: bool = False) -> T:
        """`work()` holding the lock (a read of the learned state, or a small change such as a rating), from
        the event loop, never blocking the loop on the lock: on the loop at once when the lock is free and no
        read of the loop waits for it; else on the reader thread (`Readers`) after the chunk being learned, not
        after the work handed over. `midway`: a read that may see a run part-learned (a recommendation; nothing
        that persists the state or changes the model) is done by the worker itself at the next break in the run
        being learned (`answer_midway`), if that comes before the reader thread has the lock; it may then overtake
        a read asked before it that waits for the run's end. `beside`: on the reader thread even with the lock
        free, for a read too long to run on the loop (a snapshot's copy of the whole state, a catalogue taken).
        A caller cancelled before the work starts skips it; one cancelled while it runs leaves it to end, its
        result dropped (so what is done on the loop with the result, such as opening a decision, is not). Once
        the thread is closed (a shutdown's last heartbeat) nothing learns any more: on the loop."""
        if self._closed:
            with self.lock:
                return work()
        if not beside and not self._reading and self.lock.take():  # not before a read asked earlier: in order
            try:
                return work()
            finally:
                self.lock.__exit__(None, None, None)
        self._reading += 1
        try:
            asked = self._readers.ask(work)
            if midway:
                self._midway.append((cast(Future[object], asked), work))
            return await asyncio.wrap_future(asked)
        finally:
            self._reading -= 1

    def answer_midway(self) -> None:
        """At a break in a run (`Lessons.pause`: the model whole, the run part-learned; a run of live calls, or a
        batch of a replay of the log), holding the lock: the reads asked `midway` are done here, so that a
        recommendation waits for a part of a run (a minibatch step), not the run. The run's calls are marked
        learned only once it ends, so nothing that copies or persists the state gets in here, nor anything that
        changes the model (a rating): a snapshot taken mid-run would learn the run again on restore, and the
        run's minibatches keep a copy of the weights."""
        while self._midway:
            if (answer := _done(*self._midway.popleft())) is not None:
                answer()

    def _locked(self, work: Callable[[], T]) -> T:
        with self.lock:
            self._worker = threading.get_ident()
            self._since = time.perf_counter()  # the loop ran while the worker waited for this work
            return work()

    def let_loop_run(self) -> None:
        """Between two learning steps of the work: once `SLICE_S` of it has passed since the loop's last
        turn, give the loop a turn (the module's docstring). Does nothing off the learning thread (work
        small enough to do on the loop calls it too), while the loop is blocked on the lock, or once the thread
        is closing (`close` blocks the loop until the work ends)."""
        loop = self._loop
        if threading.get_ident() != self._worker or loop is None or loop.is_closed() or self._closed:
            return
        if time.perf_counter() - self._since < SLICE_S:
            return
        if not self.lock.blocks(self._loop_thread):  # a loop blocked on the lock could not take the turn
            self._turned.clear()
            loop.call_soon_threadsafe(self._turned.set)
            self._turned.wait(TURN_S)
        self._since = time.perf_counter()

    def between_steps(self, k: int) -> None:
        """Before the `k`-th step of work that holds the lock throughout (a hand-over, a batch of the log): a
        blocked reader let in every `LEARN_CHUNK` steps (`let_readers_in`), the loop given its turn (`let_loop_run`)."""
        if k % LEARN_CHUNK == 0:
            self.let_readers_in()
        self.let_loop_run()

    def let_readers_in(self) -> None:
        """Between two chunks of work that holds the lock throughout (many calls handed over at once): a reader
        blocked on the lock (the event loop, for a recommendation) takes it now, and the work goes on once it
        is given back, so a reader waits for one chunk, not the whole hand-over. The lock is not fair: let go
        and taken straight back, it would stay the worker's, so the worker sleeps (without the GIL) until the
        reader has it. Does nothing off the learning thread or with no reader blocked."""
        lock = self.lock
        if not lock.waiting or threading.get_ident() != self._worker:
            return
        lock.__exit__(None, None, None)
        deadline = time.perf_counter() + READER_S
        while lock.waiting and time.perf_counter() < deadline:
            time.sleep(HAND_S)  # the reader, woken by the release, counts itself out once it holds the lock
        lock.__enter__()
        self._since = time.perf_counter()  # the loop ran while the worker waited for the lock

    def close(self) -> None:
        """Let the work handed over and the reads asked finish, then end the threads."""
        self._closed = True
        self._executor.shutdown(wait=True)
        self._readers.close()


def _unheard(handed: asyncio.Future[T]) -> None:
    """Work handed over whose caller went away ended: its failure is logged, as nobody else hears of it."""
    if not handed.cancelled() and (failure := handed.exception()) is not None:
        log.error("work on the learning thread whose caller went away failed", exc_info=failure)


class Abandoned(Exception):
    """Raised by abandonable work that found its stop event set: nobody awaits it, it ended early as asked."""


async def abandonable(work: Callable[[threading.Event], T], *, name: str) -> T:
    """`work(stop)` on a daemon thread of its own, awaited as `asyncio.to_thread` would be, except that nothing
    waits for it once its caller is cancelled: the loop's shutdown and the interpreter's exit join the
    default executor's threads, so a shutdown would wait for it to end. For work worth nothing once nobody
    awaits it, such as a catalogue's embedding: its result is dropped, an exception it raises is logged.
    A cancelled caller sets `stop`: work that looks at it between its parts (raising `Abandoned`) frees
    its core soon after, rather than computing for nobody until the process exits."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()
    stop = threading.Event()

    def target() -> None:
        try:
            result, error = work(stop), None
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task, or logged when none awaits
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(_settle, done, name, result, error)
        except RuntimeError:  # the loop has closed: nobody awaits it any more
            _dropped(name, error)

    threading.Thread(target=target, name=name, daemon=True).start()
    try:
        return await done
    except BaseException:  # cancelled (a shutdown): nobody will take the result
        stop.set()
        raise


def _settle(done: asyncio.Future[T], name: str, result: T | None, error: BaseException | None) -> None:
    if done.done():  # its awaiting task was cancelled: abandoned
        _dropped(name, error)
    elif error is not None:
        done.set_exception(error)
    else:
        done.set_result(cast(T, result))  # None only when `error` is set


def _dropped(name: str, error: BaseException | None) -> None:
    """An abandoned work's end: its result is worth nothing, but its failure is still a defect to see."""
    if error is None or isinstance(error, Abandoned):
        log.debug("%s ended after it was abandoned: its result is dropped", name)
    else:
        log.error("%s failed after it was abandoned", name, exc_info=error)
