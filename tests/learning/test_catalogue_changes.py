"""The catalogue the learner knows while tool documents are embedded off the event loop: changes are taken
in the order they came, and the last one wins."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Sequence

import mcp_types as types
import numpy as np
import pytest
from numpy.typing import NDArray

from tests.server.surface import HeldEmbedder, held_elsewhere
from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.learning import core
from toolwise.learning.embedding import WordLlamaEmbedder
from toolwise.learning.service import LearningService
from toolwise.learning.teaching import EMBEDDING_THREAD


def tool(name: str, description: str) -> types.Tool:
    return types.Tool(name=name, description=description, input_schema={"type": "object"})


async def test_a_change_arriving_while_an_earlier_one_is_embedded_is_the_one_the_learner_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events: list[str] = []
    embedder = HeldEmbedder("translate", events)
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    first = asyncio.create_task(learning.set_tools([tool("text__translate", "Translate a text.")]))
    while not embedder.embedding.is_set():
        await asyncio.sleep(0.01)
    second = asyncio.create_task(
        learning.set_tools([tool("text__translate", "Translate a text."), tool("time__now", "The current time.")])
    )
    third = asyncio.create_task(learning.set_tools([tool("time__now", "The current time.")]))
    await asyncio.sleep(0.05)
    assert learning.learner.index.active_names == []  # nothing half-taken while the first is embedded
    embedder.release.set()
    await asyncio.gather(first, second, third)
    assert learning.learner.index.active_names == ["time__now"]  # the last catalogue
    assert list(learning.learner.index.tools.names) == ["text__translate", "time__now"]  # the first, taken before it
    assert [d.name for d in learning.tool_docs] == ["time__now"]


async def test_a_catalogue_is_taken_once_the_lock_is_free_the_event_loop_running_meanwhile() -> None:
    """While the learning thread holds the learned state's lock (a run of calls), a catalogue change waits for
    it beside the event loop (its vectors read, the catalogue taken): other tasks run meanwhile, and the
    learner has the new catalogue once the lock is free."""
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    now = tool("time__now", "The current time.")
    await learning.set_tools([now])
    with held_elsewhere(learning.lock) as let_go:
        changing = asyncio.create_task(learning.set_tools([now, tool("text__translate", "Translate a text.")]))
        ticks = 0
        while not learning.lock.waiting or ticks < 5:  # on the code before, the event loop blocked on the lock
            await asyncio.sleep(0.01)
            ticks += 1
        assert not let_go.is_set() and not changing.done()
        assert learning.learner.index.active_names == ["time__now"]
    await asyncio.wait_for(changing, 30)
    assert sorted(learning.learner.index.active_names) == ["text__translate", "time__now"]
    assert [d.name for d in learning.tool_docs] == ["time__now", "text__translate"]


async def test_a_snapshot_load_reads_the_running_vectors_whole_not_while_a_catalogue_is_taken() -> None:
    """A load (in a worker thread) reads the vectors and the documents still waiting together: a read
    between the two, as the embedded catalogue is taken, would keep a waiting document's blank vector."""
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    await learning.set_tools([tool("time__now", "The current time.")])
    with learning.lock:  # a catalogue being taken
        reading = asyncio.create_task(asyncio.to_thread(learning.running_vectors))
        for _ in range(1000):
            if learning.lock.waiting:
                break
            await asyncio.sleep(0.01)
        assert learning.lock.waiting == 1 and not reading.done()  # the read waits for the lock
    vectors, waiting = await reading
    assert waiting == frozenset() and set(vectors) == {learning.tool_docs[0].document}


async def test_a_shutdown_cancelled_while_it_stops_the_embedding_is_cancelled_still(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Stopping the catalogue's embedding awaits its cancellation; a cancel of the shutdown itself
    meanwhile (a second Ctrl-C, a supervisor's deadline) must not be taken for that one and swallowed."""
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    winding_down = asyncio.Event()

    async def teaching() -> None:  # a teaching task that takes a while to end once cancelled
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            await winding_down.wait()
            raise

    monkeypatch.setattr(learning.teaching, "_teaching", asyncio.ensure_future(teaching()))
    await asyncio.sleep(0)
    stopping = asyncio.create_task(learning.stop_teaching())
    await asyncio.sleep(0.01)
    stopping.cancel()
    await asyncio.sleep(0.01)
    winding_down.set()
    with pytest.raises(asyncio.CancelledError):
        await stopping


class SlowEmbedder:
    """WordLlama taking its time over every text, as MiniLM over a large catalogue does: the whole catalogue
    takes far longer (about 20 s) than a shutdown is given to stop it."""

    name = "slow"

    def __init__(self) -> None:
        self.inner = WordLlamaEmbedder()
        self.started = threading.Event()
        self.embedded = 0

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if any(texts):  # the documents, not the vector width's probe (an empty text) as the catalogue is listed
            self.started.set()
        time.sleep(0.005 * len(texts))
        self.embedded += len(texts)
        return self.inner.embed(texts)


async def test_a_shutdown_stops_the_abandoned_embedding_of_the_first_catalogue(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Abandoned at shutdown, the embedding's thread ends soon after (between two chunks) rather than
    computing for nobody until the process exits; its stop is no failure to log."""
    embedder = SlowEmbedder()
    monkeypatch.setattr(core, "load_embedder", lambda kind: embedder)
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    before = set(threading.enumerate())
    catalogue = [tool(f"t{i}__do", f"Do thing number {i} for the user.") for i in range(4000)]
    await learning.set_tools(catalogue, first=True)
    await asyncio.to_thread(embedder.started.wait, 10)
    [thread] = [t for t in set(threading.enumerate()) - before if t.name == EMBEDDING_THREAD]
    with caplog.at_level(logging.ERROR, logger="toolwise.learning.worker"):
        await learning.stop_teaching()  # what a shutdown does first
        await asyncio.to_thread(thread.join, 10)  # a generous bound: it ends, however slow the machine
        await asyncio.sleep(0.05)  # the thread's end reaches the loop as a callback
    assert not thread.is_alive() and embedder.embedded < len(catalogue)
    assert not caplog.records
