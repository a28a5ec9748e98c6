"""A stdio downstream's processes: the one serving watched for its exit (restarted at once, not when the
next call finds it dead), and those of a start that does not stop killed, with their process groups."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from toolwise import sdk

log = logging.getLogger(__name__)

STOP_S = 3.0  # seconds a downstream gets to stop (the SDK: close stdin, 2 s, SIGTERM) before its process is killed


def kill_spawned(server: str, spawns: list[Any], *, late: bool = True) -> None:
    """SIGKILL each process of its latest start still running, with its children (`sdk.kill_group`).
    `late`: it was given STOP_S to stop (warned about); otherwise it is killed unasked, as toolwise's own
    start was given up."""
    for process in spawns:
        if process.returncode is None:
            pid = process.pid
            if late:
                log.warning("downstream %s did not stop within %gs: killing its process %d", server, STOP_S, pid)
            else:
                log.debug("downstream %s: killing its process %d, toolwise's start given up", server, pid)
            sdk.kill_group(process)


def watch_exit(server: str, process: Any, exited: Callable[[], None]) -> asyncio.Task[None] | None:
    """A stdio downstream that exits is restarted at once, not when the next call finds it dead."""
    if process is None:
        return None

    async def watch() -> None:
        await process.wait()
        exited()

    return asyncio.create_task(watch(), name=f"toolwise-watch-{server}")
