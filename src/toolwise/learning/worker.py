"""The thread learning runs on, beside the event loop.

A learning step takes about a millisecond (the choice model's step and its replays); run on the event
loop it delayed every call waiting on the loop by as much, and with several callers the delays added
up in the tail. Here the event loop hands calls to one worker thread in small chunks and goes on
serving; the worker learns them in call order. The learned state is changed by the worker and read by
the loop, so both hold `lock` while they touch it: the worker for one chunk, the loop for one read
(a recommendation, the stats, a snapshot's state). A proxied call never takes it. The chunk is small,
so a reader waits for a few calls' learning at most, never for every call pending.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class LearningThread:
    def __init__(self) -> None:
        self.lock = threading.Lock()  # held while the learned state changes, or is read by the event loop
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolwise-learning")

    async def run(self, work: Callable[[], T]) -> T:
        """`work()` on the learning thread, holding the lock, after the work handed over before it
        (one thread: in order). Cancelling the caller does not stop work that started: it runs to its
        end, and what it learned stays learned."""
        return await asyncio.get_running_loop().run_in_executor(self._executor, self._locked, work)

    def _locked(self, work: Callable[[], T]) -> T:
        with self.lock:
            return work()

    def close(self) -> None:
        """Let the work handed over finish, then end the thread."""
        self._executor.shutdown(wait=True)
