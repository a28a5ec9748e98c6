"""The learned state's lifecycle: snapshot it, store it, load the newest at start, restore or roll back
to another (and follow a restore another process made), choose which one a restore asks for.

A snapshot holds the learner, the RNG and what of the shared log the state covers (`watermark.Covered`), not
the counters (this instance's: `learned.py`); the file format, checksum and signatures are `learning/snapshots.py`'s.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from toolwise.config import Settings
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.records import SnapshotRecord
from toolwise.learning import snapshots
from toolwise.learning.learned import LearnedState
from toolwise.learning.service import LearningService
from toolwise.learning.sharing import Sharing
from toolwise.learning.watermark import Covered
from toolwise.rl import Learner, ToolDoc
from toolwise.rl.state import contents, pack, unpack

log = logging.getLogger(__name__)

# The snapshots toolwise takes on its own (a start-up's replay checkpoints too): one identical to the newest
# stored (an idle interval, a restart without a call) is not stored again, so that idle restarts and ticks do
# not push the `snapshot_keep` snapshots a rollback goes back to out of the store. One asked for is stored.
UNCHANGED_NOT_STORED = frozenset(["periodic", "shutdown"])


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A snapshot decoded into a fresh learner, not yet the current state."""

    learner: Learner
    rng: np.random.Generator
    docs: list[ToolDoc]  # the catalogue it was prepared for


@dataclass(frozen=True, slots=True)
class _Captured:
    """The learned state as copied at one moment, and what a snapshot record says about it."""

    source: str
    state: dict[str, Any]
    policy: str
    sample_count: int
    covered: dict[str, Any]
    created_at: datetime


class Snapshotting:
    def __init__(
        self, settings: Settings, feedback: FeedbackService, learning: LearningService, sharing: Sharing
    ) -> None:
        self.settings = settings
        self.feedback = feedback
        self.learning = learning
        self.sharing = sharing
        self.namespace = settings.namespace
        self.sign_key = snapshots.load_private_key(settings.snapshot_sign_key) if settings.snapshot_sign_key else None
        self.verify_key = (
            snapshots.load_public_key(settings.snapshot_verify_key) if settings.snapshot_verify_key else None
        )
        self.snapshot_id: int | None = None  # the snapshot the state was loaded from or last saved as
        self._contents: tuple[tuple[str, int, int], ...] = ()  # what that snapshot's payload holds (`_holds`)
        self._restores_seen = 0  # newest restore/rollback snapshot id already followed
        self._saving = asyncio.Lock()  # a save or restore from capture to stored, one at a time
        self._restoring: set[asyncio.Future[SnapshotRecord]] = set()  # restores under way, held to their end

    def snapshot(self, source: str) -> SnapshotRecord:
        """The learned state as it is now (call after `drain`), with what of the log it covers."""
        return self._record(self._capture(source))

    def _capture(self, source: str) -> _Captured:
        """A consistent copy of the learned state, taken holding the learning lock (`save` takes it through
        `LearningThread.read`, which never blocks the event loop on it): every `state_dict` builds new
        arrays and lists, so learning that goes on while it is packed elsewhere cannot reach it."""
        with self.learning.lock:
            return self._captured(source)

    def _captured(self, source: str) -> _Captured:
        learning = self.learning
        return _Captured(
            source=source,
            state={
                "learner": learning.learner.state_dict(),
                "rng": learning.state.rng.bit_generator.state,
            },
            policy=learning.learner.policy.name,
            sample_count=learning.learner.updates,
            covered=learning.covered.state(),
            created_at=utcnow(),
        )

    def _record(self, captured: _Captured) -> SnapshotRecord:
        """The captured state packed, checksummed and signed: pure CPU over data nothing else holds, so
        it can run in a worker thread while the event loop serves calls."""
        # shutdown: undeflated, to fit in the time a client gives
        payload = pack(captured.state, deflate=captured.source != "shutdown")
        record = SnapshotRecord(
            namespace=self.namespace,
            version=snapshots.VERSION,
            policy=captured.policy,
            source=captured.source,
            created_at=captured.created_at,
            sample_count=captured.sample_count,
            covered=captured.covered,
            sha256=snapshots.checksum(payload),
            payload=payload,
        )
        return snapshots.sign(record, self.sign_key) if self.sign_key is not None else record

    async def save(self, source: str) -> SnapshotRecord:
        """Take a snapshot and store it (keeping the newest `snapshot_keep`). The state is copied holding the
        lock beside the event loop, never on it (a year's state is large: proxied calls must not wait on its
        copy), and packed in a worker thread; one save (or restore) at a time, so the newest stored is the
        newest taken."""
        async with self._saving:
            await self.learning.until_loaded()  # the empty state a start-up replaces is no snapshot
            await self.learning.drain()
            learned = self.learning.state.unsnapshotted  # before the capture: a call completed meanwhile is not in it
            captured = await self.learning.thread.read(lambda: self._captured(source), beside=True)
            record = await asyncio.to_thread(self._record, captured)
            held = contents(record.payload)
            newest = await self.feedback.snapshots.list(self.namespace) if source in UNCHANGED_NOT_STORED else []
            if newest and self._holds(newest[0], record, held):
                self.learning.state.snapshotted(learned)
                log.info("snapshot %d still holds the learned state (%s): not stored again", self.snapshot_id, source)
                return newest[0]
            self.snapshot_id = await self.feedback.snapshots.save(record, keep=self.settings.snapshot_keep)
            self._contents = held
            self.learning.state.snapshotted(learned)  # what was learned since it was taken is not in it
        log.info("snapshot %d saved (%s, %d samples)", self.snapshot_id, source, record.sample_count)
        return replace(record, id=self.snapshot_id)

    def _holds(self, stored: SnapshotRecord, record: SnapshotRecord, held: tuple[tuple[str, int, int], ...]) -> bool:
        """Whether `stored`, the newest, holds what `record` would: it is the snapshot this state was loaded
        from or last saved as, with the same contents (`held`: a shutdown's is packed undeflated, a periodic
        one's deflated), log covered, policy and version, and signed by our key when we sign (a signature
        covers a snapshot's own time and source: never equal to another's)."""
        if stored.id is None or stored.id != self.snapshot_id or held != self._contents:
            return False
        if (stored.covered, stored.policy, stored.version) != (record.covered, record.policy, record.version):
            return False
        return self.sign_key is None or snapshots.signed_by(stored, self.sign_key.public_key())

    async def load(self, record: SnapshotRecord, *, covered: dict[str, Any] | None = None) -> None:
        """Adopt a snapshot's state, all or nothing: verified and loaded into a fresh learner first, in a
        worker thread (the catalogue's vectors are the running learner's: only the documents of tools the
        snapshot names and the catalogue does not are embedded) while the event loop serves, so a refused
        snapshot leaves the current state untouched. Call it within `LearningService.holding_calls`: the
        calls noted meanwhile are learned into the loaded state. `covered` overrides what of the log the
        state counts as including (a restore or rollback takes it "as of now")."""
        prepared = await asyncio.to_thread(self._prepare, record)
        await self._install(prepared, record, covered)

    def _prepare(self, record: SnapshotRecord) -> _Prepared:
        """The snapshot verified and decoded into a fresh learner that nothing else holds yet (so it can
        run in a worker thread while the event loop serves). Raises SnapshotError."""
        learning = self.learning
        snapshots.verify(record, self.verify_key)
        if record.policy != learning.learner.policy.name:
            raise snapshots.SnapshotError(
                f"snapshot was learned by policy {record.policy!r}; this toolwise runs {learning.learner.policy.name!r}"
            )
        docs = learning.tool_docs
        try:
            state = unpack(record.payload)
            learner = learning.new_learner(reuse=True)  # the catalogue's vectors are not embedded again
            learner.load_state(state["learner"])
            rng = np.random.default_rng()
            rng.bit_generator.state = state["rng"]
        except (KeyError, ValueError, TypeError) as exc:
            raise snapshots.SnapshotError(f"snapshot state cannot be loaded: {exc}") from exc
        if docs:  # the catalogue is what is running now, its vectors those the running learner has
            vectors, later = learning.running_vectors()
            learner.set_tools(docs, vectors, later=later)
        return _Prepared(learner, rng, docs)

    async def _install(self, prepared: _Prepared, record: SnapshotRecord, covered: dict[str, Any] | None) -> None:
        """Make a prepared state the current one, whole (`LearningCore.adopt`: on the learning thread)."""
        learning = self.learning
        await learning.adopt(partial(self._installed, prepared, record, covered))
        self.snapshot_id, self._contents = record.id, contents(record.payload)

    def _installed(self, prepared: _Prepared, record: SnapshotRecord, covered: dict[str, Any] | None) -> LearnedState:
        """The learned state of a prepared snapshot, holding the lock: the catalogue the running learner knows."""
        learning = self.learning
        learner = prepared.learner
        running = learning.learner.index
        if learning.tool_docs is not prepared.docs or learner.index.unembedded != running.unembedded:
            # the catalogue changed while it was prepared, or its documents were embedded meanwhile
            learner.set_tools(learning.tool_docs, running.vectors, later=running.unembedded)
        return LearnedState(learner, prepared.rng, Covered.of(record.covered if covered is None else covered))

    async def restore_latest(self) -> str:
        """Load the newest usable snapshot and learn the log recorded after it (admin commands; a
        server catches up in the background instead). Returns what happened, for the log."""
        loaded = await self.load_latest()
        replayed = await self.sharing.catch_up()
        return f"{loaded} + {replayed} log entries replayed"

    async def catch_up(self, snapshot_rows: int = 0) -> int:
        """`Sharing.catch_up`, storing a snapshot every `snapshot_rows` rows learned (0: none)."""
        return await self.sharing.catch_up(snapshot_rows, checkpoint=lambda: self.save("periodic"))

    async def load_latest(self) -> str:
        """Load the newest usable snapshot; one that cannot be used is reported and the next older one
        tried. Until `Sharing.catch_up` has learned the log after it, the state lags: recommendations
        come from the prior. Returns what was loaded, for the log."""
        learning = self.learning
        learning.progress.begin()
        listing = await self.feedback.snapshots.list(self.namespace)
        self._restores_seen = max((r.id or 0 for r in listing), default=0)
        for listed in listing:
            record = await self.feedback.snapshots.get(listed.id, namespace=self.namespace)
            if record is None:
                continue
            try:  # decoded in a worker thread: a server answers meanwhile, from the prior
                prepared = await asyncio.to_thread(self._prepare, record)
            except snapshots.SnapshotError as exc:
                log.warning("snapshot %s not used: %s", listed.id, exc)
                continue
            await self._install(prepared, record, None)
            return f"snapshot {record.id} ({record.sample_count} samples, {record.created_at:%Y-%m-%d %H:%M:%S})"
        return "no snapshot"

    async def adopt(self, record: SnapshotRecord, source: str) -> SnapshotRecord:
        """Restore: make `record` the current state as of now (the log so far counts as covered, so it
        is not replayed on top) and store it as the newest snapshot. Refused → nothing changes. A caller
        that goes away (a client's timeout) does not stop a restore under way: cut between installing the
        state and marking it stored, it would be followed again as another process's, and the calls learned
        since dropped."""
        restoring = asyncio.ensure_future(self._adopt_alone(record, source))
        self._restoring.add(restoring)
        restoring.add_done_callback(self._restoring.discard)
        try:
            return await asyncio.shield(restoring)
        except asyncio.CancelledError:
            restoring.add_done_callback(_unheard)  # nobody hears how it ends: the log does
            raise

    async def _adopt_alone(self, record: SnapshotRecord, source: str) -> SnapshotRecord:
        async with self._saving:  # not overtaken by a periodic snapshot of the state it replaces
            return await self._adopt(record, source)

    async def _adopt(self, record: SnapshotRecord, source: str) -> SnapshotRecord:
        await self.learning.until_loaded()  # else the start-up's load would replace it
        async with self.learning.holding_calls():  # the calls noted from here are learned into the restored state
            return await self._adopt_held(record, source)

    async def _adopt_held(self, record: SnapshotRecord, source: str) -> SnapshotRecord:
        # high_water commits what was queued first: the calls learned into the replaced state (drained by
        # `holding_calls`) fall under the marks, not learned again on top of the restored state by a sync
        seq, rating_id = await self.feedback.reads.high_water(self.namespace)
        _, _, episode = await self.feedback.reads.heads(self.namespace)
        covered: dict[str, Any] = {  # the episode ends too: without a mark, the ends until the next sync are skipped
            "executions": {"floor": seq, "seen": []},
            "ratings": {"floor": rating_id, "seen": []},
            "episodes": {"floor": episode, "seen": []},
            "live": [],
        }
        if record.id is not None:
            covered["origin"] = record.covered.get("origin") or record.id  # a stored one: where it comes from
        await self.load(record, covered=covered)
        # this namespace's state now, whichever namespace a file was dumped from: stored there, not in the file's
        stored = replace(record, namespace=self.namespace, source=source, covered=covered, id=None, created_at=utcnow())
        if self.sign_key is not None:
            stored = snapshots.sign(stored, self.sign_key)
        elif stored.signature is not None:
            stored = replace(stored, signature=None)  # the covered marks changed: the old signature no longer fits
        self.snapshot_id = self._restores_seen = await self.feedback.snapshots.save(
            stored, keep=self.settings.snapshot_keep
        )
        log.warning("learned state replaced by a %s (%d samples)", source, record.sample_count)
        return replace(stored, id=self.snapshot_id)

    async def follow_restores(self) -> None:
        """Another process restored or rolled back a snapshot of this namespace: adopt it too. One save or
        restore at a time: a restore made here meanwhile is not undone by the older one followed after it."""
        async with self._saving:
            await self._follow_restores()

    async def _follow_restores(self) -> None:
        for listed in await self.feedback.snapshots.list(self.namespace):
            if (listed.id or 0) <= self._restores_seen:
                return
            if listed.source not in ("restore", "rollback"):
                continue
            record = await self.feedback.snapshots.get(listed.id, namespace=self.namespace)
            if record is not None:
                try:
                    async with self.learning.holding_calls():
                        await self.load(record)
                    log.warning("adopted snapshot %s (%s by another process)", listed.id, listed.source)
                except snapshots.SnapshotError as exc:
                    log.warning("restored snapshot %s not adopted: %s", listed.id, exc)
            # Followed once adopted or refused as unusable: a read or drain the store refused is tried again at
            # the next tick, not counted followed while the state the admin rolled back from stays served.
            self._restores_seen = listed.id or 0
            return

    async def choose(self, snapshot_id: int | None, path: str | None, previous: bool) -> SnapshotRecord:
        """The snapshot a restore asks for: exactly one of an id, a file, or the one before the current."""
        if sum((snapshot_id is not None, path is not None, previous)) != 1:
            raise snapshots.SnapshotError("give exactly one of snapshot_id, input (a file) or previous")
        if path is not None:
            return snapshots.read_file(Path(path))
        if previous:
            # The newest snapshot's lineage: a rollback row stands for the snapshot it rolled back to, so
            # rolling back twice goes two steps back rather than undoing the first rollback.
            listed = await self.feedback.snapshots.list(self.namespace)
            origin = int(listed[0].covered.get("origin") or listed[0].id or 0) if listed else 0
            older = [r for r in listed if (r.id or 0) < origin]
            if not older:
                raise snapshots.SnapshotError(
                    f"no snapshot older than #{origin} to roll back to ({len(listed)} stored)"
                )
            snapshot_id = older[0].id
        record = await self.feedback.snapshots.get(snapshot_id, namespace=self.namespace)
        if record is None:
            raise snapshots.SnapshotError(f"no snapshot {snapshot_id} in namespace {self.namespace!r}")
        return record


def _unheard(restoring: asyncio.Future[SnapshotRecord]) -> None:
    """A restore whose caller went away ended: its failure is logged, as nobody else hears of it."""
    if not restoring.cancelled() and (failure := restoring.exception()) is not None:
        log.error("a restore whose caller went away failed", exc_info=failure)
