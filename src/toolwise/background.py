"""Tasks started and not awaited, that are neither lost nor silent: held until they finish (the event
loop keeps only weak references to tasks) and their failures logged as errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from functools import partial
from typing import Any

log = logging.getLogger(__name__)


class Background:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str, failure: str) -> asyncio.Task[None]:
        """Run `work` as a task; if it raises, log `failure` with the exception."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(partial(self._finished, failure))
        return task

    def _finished(self, failure: str, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error(failure, exc_info=task.exception())

    async def cancel(self) -> None:
        """Cancel every task started so far and return once each has ended (work nobody wants any more)."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)

    async def wait(self) -> None:
        """Return once every task started so far has finished (their failures are already logged)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
