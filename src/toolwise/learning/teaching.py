"""Teaching the learner the running catalogue: a catalogue's new tool documents are embedded in a thread
of their own while the event loop serves, and the learner takes the catalogue whole under the learning
thread's lock, beside the loop too (a catalogue's index, its names, its vectors stacked). One task takes
the changes in the order they came, so the last catalogue wins; a shutdown does not wait for an embedding
(`Teaching.stop`). A server's first catalogue is listed (BM25 alone scoring it until it is embedded) while
the server already answers; toolwise's own tools wait for it (`listed`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from functools import partial
from typing import Protocol, TypeVar

import numpy as np
from numpy.typing import NDArray

from toolwise.learning.embedding import embed_until_stopped
from toolwise.learning.worker import StateLock, abandonable
from toolwise.rl import Learner, ToolDoc
from toolwise.rl.embedding import Embedder

EMBEDDING_THREAD = "toolwise-embedding"  # the thread a catalogue's new documents are embedded on (abandonable)
MODEL_LOAD_THREAD = "toolwise-model-load"  # the thread the embedder's model loads on at start (abandonable)

T = TypeVar("T")


class Reads(Protocol):
    """`LearningCore.read_learned`: `read(learner)` under the lock, the event loop never blocked on it."""

    def __call__(self, read: Callable[[Learner], T], /, *, beside: bool = False) -> Awaitable[T]: ...


def vectors_of(learner: Learner) -> tuple[dict[str, NDArray[np.float32]], frozenset[str]]:
    """`learner`'s document vectors and the documents still waiting to be embedded (`running_vectors`)."""
    return learner.index.vectors, learner.index.unembedded


class Teaching:
    """The catalogue the learner knows (`docs`) and the teaching of the newest one given (`set_tools`)."""

    def __init__(
        self,
        lock: StateLock,
        learner: Callable[[], Learner],
        embedder: Embedder | None,
        read: Reads,
    ) -> None:
        self.lock = lock  # the learning thread's: held while the learner takes a catalogue off the event loop
        self._learner = learner  # the current learner, looked up at each use: a restore replaces it
        self._read = read  # `LearningCore.read_learned`: the event loop's way in, never blocking it on the lock
        self.embedder = embedder
        self.docs: list[ToolDoc] = []
        self._wanted = self.docs  # the catalogue last given to `set_tools`, taken by `_teach`
        self._teaching: asyncio.Future[None] | None = None
        self._listing: asyncio.Future[None] | None = None  # the first catalogue listed beside the loop (`listed`)

    def running_vectors(self) -> tuple[dict[str, NDArray[np.float32]], frozenset[str]]:
        """The running learner's document vectors and the documents still waiting to be embedded, read
        together under the lock from a thread other than the event loop's (on it: `_read` of `vectors_of`):
        `_teach` replaces both, and a read between the two could take a waiting document's blank vector for
        its embedding."""
        with self.lock:
            return vectors_of(self._learner())

    async def set_tools(self, docs: list[ToolDoc], *, first: bool = False) -> None:
        """Teach the learner the catalogue `docs`; returns once it knows this one (or a newer). Its new
        documents are embedded in a thread of their own while the event loop serves (a shutdown does not
        wait for it: `stop`); the learner then takes it whole under the lock, beside the loop. `first` (a
        server's start, nothing listed yet): returns at once; the learner lists the catalogue beside the loop
        first (`listed`), BM25 alone scoring its documents until they are embedded (`taken`)."""
        self._wanted = docs
        if first:
            later = {doc.document for doc in docs}
            self._listing = asyncio.ensure_future(self._read(partial(self._take, docs, {}, later=later), beside=True))
        if self._teaching is None or self._teaching.done():
            self._teaching = asyncio.ensure_future(self._teach())
        if not first:
            await self.taken()

    async def listed(self) -> None:
        """Return once the learner lists the first catalogue (`set_tools`'s `first`), at once after: what reads
        the catalogue (toolwise's own tools) waits for it, as for a catalogue taken later (its lock). A listing
        that failed does not hold them up: the teaching says why (`_teach`, `taken`)."""
        if self._listing is not None and not self._listing.done():
            await asyncio.wait([self._listing])

    async def taken(self) -> None:
        """Return once the learner has the last catalogue given, every document embedded."""
        if self._teaching is not None:
            await asyncio.shield(self._teaching)  # a caller cancelled does not stop the catalogue being taken

    async def _teach(self) -> None:
        if self._listing is not None:
            try:
                await self._listing  # a failure ends this teaching (`taken` raises it), not the next one's
            finally:
                self._listing = None
        while self._wanted is not self.docs or self._learner().index.unembedded:
            docs = self._wanted
            vectors = await self._embed_ahead(docs)
            # beside the event loop: as long as the catalogue (its index, the name index, the vectors stacked)
            await self._read(partial(self._take, docs, vectors), beside=True)

    def _take(
        self,
        docs: list[ToolDoc],
        vectors: dict[str, NDArray[np.float32]],
        learner: Learner,
        *,
        later: Collection[str] = (),
    ) -> None:
        """The learner takes the catalogue `docs`, embedded but for the documents `later` (under the lock, with
        `docs`: read together)."""
        learner.set_tools(docs, vectors, later)
        self.docs = docs

    async def stop(self) -> None:
        """Shutting down: a catalogue still being embedded is not waited for (its embedding is abandoned);
        the learner keeps the catalogue it knew, BM25 alone scoring what was not embedded yet."""
        if self._teaching is not None and not self._teaching.done():
            self._teaching.cancel()
            # its cancellation is not taken for this caller's: a shutdown cancelled meanwhile still stops
            await asyncio.wait([self._teaching])

    async def _embed_ahead(self, docs: list[ToolDoc]) -> dict[str, NDArray[np.float32]]:
        """The vectors of `docs`' documents: those the learner has, and the others embedded in a worker
        thread (the embedders are safe to call beside the learning thread: they keep no state a call changes)."""
        if self.embedder is None:
            return {}
        known, _ = await self._read(vectors_of)
        vectors = {doc.document: known[doc.document] for doc in docs if doc.document in known}
        missing = [d for d in dict.fromkeys(doc.document for doc in docs) if d not in known]
        if missing:  # abandoned by a shutdown meanwhile (`stop`): the learner keeps what it had
            embedded = await abandonable(partial(embed_until_stopped, self.embedder, missing), name=EMBEDDING_THREAD)
            vectors.update(zip(missing, embedded, strict=True))
        return vectors
