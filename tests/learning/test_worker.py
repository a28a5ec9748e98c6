"""The learned state's lock counts the threads blocked on it (`StateLock.waiting`): while one waits, the
learning thread gives no turn to an event loop that cannot take it. The count must come back to 0, or
the worker would never give the loop a turn again. And `abandonable`: work nobody awaits any more still
has its failure logged."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

import pytest

from toolwise.learning.worker import SLICE_S, LearningThread, StateLock, abandonable


def wait_until(check: Callable[[], bool], within_s: float = 10.0) -> None:
    """Poll (a bounded wait, not a timing assertion) until `check()` holds."""
    deadline = time.monotonic() + within_s
    while not check():
        assert time.monotonic() < deadline, "gave up waiting"
        time.sleep(0.005)


def test_a_reader_blocked_on_the_lock_is_counted_until_it_has_the_lock() -> None:
    lock = StateLock()
    got = threading.Event()
    counted_inside: list[int] = []

    def reader() -> None:
        with lock:
            counted_inside.append(lock.waiting)
            got.set()

    with lock:  # the learning thread, learning a chunk
        assert lock.waiting == 0
        thread = threading.Thread(target=reader)
        thread.start()
        wait_until(lambda: lock.waiting == 1)
        assert not got.is_set()
    thread.join(timeout=10)
    assert got.is_set() and counted_inside == [0] and lock.waiting == 0


def test_an_uncontended_lock_counts_no_one() -> None:
    lock = StateLock()
    with lock:
        assert lock.waiting == 0
    assert lock.waiting == 0


class Interrupted(Exception):
    """What a signal's handler raises in a thread blocked on the lock (Ctrl-C's KeyboardInterrupt)."""


class RaisingLock:
    """A lock always held elsewhere, whose blocking acquire is cut short by an exception."""

    def __init__(self, counted: StateLock) -> None:
        self.counted, self.seen = counted, -1

    def acquire(self, blocking: bool = True) -> bool:
        if not blocking:
            return False
        self.seen = self.counted.waiting  # counted while it blocks
        raise Interrupted("the wait was cut short")

    def release(self) -> None:
        raise AssertionError("a lock never acquired was released")


def test_a_reader_whose_wait_is_cut_short_is_no_longer_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    lock = StateLock()
    raising = RaisingLock(lock)
    monkeypatch.setattr(lock, "_lock", raising)
    with pytest.raises(Interrupted), lock:
        raise AssertionError("the lock was never acquired")
    assert raising.seen == 1 and lock.waiting == 0


async def test_the_worker_gives_the_loop_no_turn_while_the_loop_waits_for_the_lock_and_one_while_another_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A turn posted to a loop blocked on the lock could not run: the worker would wait for nothing. A reader
    thread blocked on it (the loop's reads wait there) does not keep the loop from its turns."""
    worker = LearningThread()
    loop = asyncio.get_running_loop()
    posted: list[Callable[..., object]] = []
    post = loop.call_soon_threadsafe

    def spy(callback: Callable[..., object], *args: object) -> asyncio.Handle:
        posted.append(callback)
        return post(callback, *args)

    def read() -> None:
        with worker.lock:
            pass  # a reader that takes the lock and gives it back

    turns: list[int] = []

    def work() -> None:  # on the learning thread, holding the lock
        monkeypatch.setattr(loop, "call_soon_threadsafe", spy)
        post(read)  # the event loop blocks on the lock
        wait_until(lambda: worker.lock.waiting == 1)
        time.sleep(2 * SLICE_S)  # a slice of work done: a turn is due
        worker.let_loop_run()
        turns.append(len(posted))
        worker.lock.__exit__(None, None, None)  # let the loop in and out, then take the lock back
        wait_until(lambda: worker.lock.waiting == 0)
        worker.lock.__enter__()
        reader = threading.Thread(target=read)  # a reader thread blocks on the lock
        reader.start()
        wait_until(lambda: worker.lock.waiting == 1)
        time.sleep(2 * SLICE_S)
        worker.let_loop_run()
        turns.append(len(posted))
        worker.lock.__exit__(None, None, None)
        reader.join(timeout=10)
        worker.lock.__enter__()

    await worker.run(work)
    worker.close()
    assert turns == [0, 1]


async def test_the_worker_lets_a_blocked_reader_in_between_chunks_and_holds_the_lock_again_after() -> None:
    """Work handed over whole holds the lock throughout: a reader blocked on it gets in when the worker lets
    it (between chunks), before the worker goes on, not once the whole work is done."""
    worker = LearningThread()
    order: list[str] = []

    def read() -> None:
        with worker.lock:
            order.append("reader")

    def work() -> None:  # on the learning thread, holding the lock
        reader = threading.Thread(target=read)
        reader.start()
        wait_until(lambda: worker.lock.waiting == 1)
        worker.let_readers_in()
        order.append("worker, the lock its own again")
        reader.join(timeout=10)

    await worker.run(work)
    worker.close()
    assert order == ["reader", "worker, the lock its own again"]


class EmbeddingBroke(Exception):
    """What an embedder raises (a model file gone, a tokenizer's error)."""


async def test_abandonable_hands_its_work_result_and_failure_to_the_awaiting_task() -> None:
    assert await abandonable(lambda stop: 42, name="answer") == 42

    def broken(stop: threading.Event) -> int:
        raise EmbeddingBroke("the model file is gone")

    with pytest.raises(EmbeddingBroke, match="model file is gone"):
        await abandonable(broken, name="broken")


async def test_a_failure_of_abandoned_work_is_logged_not_lost(caplog: pytest.LogCaptureFixture) -> None:
    release, ended = threading.Event(), threading.Event()

    def embedding(stop: threading.Event) -> int:
        release.wait(10)
        ended.set()
        raise EmbeddingBroke("the model file is gone")

    waiting = asyncio.ensure_future(abandonable(embedding, name="toolwise-embedding"))
    await asyncio.sleep(0)
    waiting.cancel()  # a shutdown: nobody awaits the embedding any more
    with pytest.raises(asyncio.CancelledError):
        await waiting
    with caplog.at_level(logging.ERROR, logger="toolwise.learning.worker"):
        release.set()
        for _ in range(1000):  # the thread's end reaches the loop as a callback: let it run
            if any(r.exc_info for r in caplog.records):
                break
            await asyncio.sleep(0.01)
    assert ended.is_set()
    [record] = [r for r in caplog.records if r.exc_info]
    assert "toolwise-embedding failed after it was abandoned" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], EmbeddingBroke)


def held_by_another_thread(lock: StateLock) -> tuple[threading.Event, threading.Thread]:
    """`lock` held by a thread of its own (the learning thread, learning a chunk) until the event is set."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    return release, holder


async def test_a_read_with_the_lock_free_is_done_at_once_on_the_event_loop() -> None:
    worker = LearningThread()
    assert await worker.read(threading.get_ident) == threading.get_ident()
    assert worker.lock.take(), "the read gave the lock back"
    worker.lock.__exit__(None, None, None)
    worker.close()


async def test_reads_asked_while_the_lock_is_held_wait_beside_the_loop_and_are_done_in_order_under_one_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The event loop goes on while reads wait for the lock; they are done on a thread of their own (not the
    loop, not the learning thread's queue), in the order asked, all under the one hold the worker let them in
    for: concurrent readers wait for one chunk, not one each."""
    worker = LearningThread()
    release, holder = held_by_another_thread(worker.lock)
    entered: list[int] = []
    enter = StateLock.__enter__

    def counted(lock: StateLock) -> None:
        entered.append(threading.get_ident())
        enter(lock)

    monkeypatch.setattr(StateLock, "__enter__", counted)
    done: list[tuple[str, int]] = []

    def reading(name: str) -> Callable[[], None]:
        return lambda: done.append((name, threading.get_ident()))

    reads = [asyncio.ensure_future(worker.read(reading(n))) for n in "abc"]
    ticks = 0
    while worker.lock.waiting == 0 or ticks < 5:  # the loop runs on while the reads wait
        await asyncio.sleep(0.001)
        ticks += 1
    assert not done and not any(r.done() for r in reads)
    release.set()
    await asyncio.gather(*reads)
    holder.join(10)
    (reader,) = set(entered)
    assert [n for n, _ in done] == ["a", "b", "c"] and {t for _, t in done} == {reader}
    assert reader != threading.get_ident()
    worker.close()


async def test_a_read_whose_caller_went_away_before_it_got_the_lock_is_not_done() -> None:
    worker = LearningThread()
    release, holder = held_by_another_thread(worker.lock)
    done: list[str] = []
    gone = asyncio.ensure_future(worker.read(lambda: done.append("gone")))
    wait_until_async = asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: worker.lock.waiting == 1)
    await wait_until_async
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    kept = asyncio.ensure_future(worker.read(lambda: done.append("kept")))
    release.set()
    await kept
    holder.join(10)
    assert done == ["kept"]
    worker.close()


async def test_a_read_asked_while_an_earlier_one_is_not_back_does_not_overtake_it() -> None:
    """The lock free again before the event loop has the first read's answer: a read asked then goes after it
    (a recommendation asked later never decides before one asked earlier), not at once on the loop."""
    worker = LearningThread()
    release, holder = held_by_another_thread(worker.lock)
    answered: list[str] = []
    first_done = threading.Event()

    async def asked(name: str, work: Callable[[], object]) -> None:
        await worker.read(work)
        answered.append(name)

    first = asyncio.ensure_future(asked("first", first_done.set))
    await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: worker.lock.waiting == 1)
    release.set()
    first_done.wait(10)  # the first read is done; its answer has not reached the loop yet (the loop is here)
    wait_until(worker.lock.take)  # and the lock is free again
    worker.lock.__exit__(None, None, None)
    second = asyncio.ensure_future(asked("second", lambda: None))
    await asyncio.gather(first, second)
    holder.join(10)
    assert answered == ["first", "second"]
    worker.close()


async def test_once_closed_a_read_is_done_on_the_event_loop() -> None:
    worker = LearningThread()
    release, holder = held_by_another_thread(worker.lock)
    waiting = asyncio.ensure_future(worker.read(threading.get_ident))
    await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: worker.lock.waiting == 1)
    release.set()
    reader = await waiting
    holder.join(10)
    worker.close()  # the reads asked are answered, then the reader thread ends
    assert reader != threading.get_ident()
    assert await worker.read(threading.get_ident) == threading.get_ident()


async def test_the_worker_gives_no_turn_to_a_loop_blocked_closing_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """`close` blocks the event loop until the work handed over ends (a shutdown, with the work of a sync the
    upkeep's cancel left behind): a turn posted to it could not run, so each step would wait `TURN_S` for
    nothing, out of the little time a client gives a shutdown."""
    worker = LearningThread()
    loop = asyncio.get_running_loop()
    posted: list[Callable[..., object]] = []
    post = loop.call_soon_threadsafe
    started, closing = threading.Event(), threading.Event()

    def spy(callback: Callable[..., object], *args: object) -> asyncio.Handle:
        posted.append(callback)
        return post(callback, *args)

    def work() -> int:  # on the learning thread: steps of a batch, the loop closing the thread meanwhile
        started.set()
        closing.wait(10)
        wait_until(lambda: worker._closed)
        monkeypatch.setattr(loop, "call_soon_threadsafe", spy)  # what is posted once the loop closes the thread
        for _ in range(5):
            time.sleep(2 * SLICE_S)  # a slice of work done: a turn would be due
            worker.let_loop_run()
        return len(posted)

    handed = asyncio.ensure_future(worker.run(work))
    await asyncio.to_thread(started.wait, 10)
    closing.set()
    worker.close()  # blocks the loop until `work` ends
    assert await handed == 0


async def test_a_midway_read_is_done_once_by_the_holder_at_a_break_in_its_run_and_a_plain_one_after_the_run() -> None:
    """While the lock is held for a run, a read asked `midway` (a recommendation) is done by the holder at the
    run's next break (`answer_midway`), once: the reader thread, let in after the run, skips it. A plain read
    (a rating, a snapshot's copy) asked meanwhile is not done at the break: after the run, by the reader thread."""
    worker = LearningThread()
    held, at_break, release = (threading.Event() for _ in range(3))
    done: list[tuple[str, int]] = []

    def run() -> None:
        with worker.lock:
            held.set()
            at_break.wait(30)
            worker.answer_midway()  # a break between two minibatch steps
            release.wait(30)

    holder = threading.Thread(target=run)
    holder.start()
    held.wait()
    plain = asyncio.ensure_future(worker.read(lambda: done.append(("plain", threading.get_ident()))))
    midway = asyncio.ensure_future(worker.read(lambda: done.append(("midway", threading.get_ident())), midway=True))
    await asyncio.get_running_loop().run_in_executor(None, wait_until, lambda: worker.lock.waiting == 1)
    at_break.set()
    await midway
    assert done == [("midway", holder.ident)] and not plain.done()
    release.set()
    await plain
    holder.join(10)
    assert [name for name, _ in done] == ["midway", "plain"] and done[1][1] != holder.ident
    worker.close()
