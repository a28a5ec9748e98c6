"""The upkeep beside serving: following restores, sharing what other instances logged, periodic
snapshots, retention and the heartbeat; and what this instance reports about itself (its status, the
gauges of the metrics)."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from toolwise.feedback import utcnow
from toolwise.feedback.errors import describe_database_error
from toolwise.feedback.failures import DATABASE_FAILURES
from toolwise.feedback.instances import HEARTBEAT_S
from toolwise.feedback.records import InstanceStatus
from toolwise.server import heap
from toolwise.server.services import Services
from toolwise.server.stats import learning_stats

log = logging.getLogger(__name__)
OUTAGE_REPEAT_S = 60.0  # a database still failing the upkeep is said again this often, not at every tick
SNAPSHOT_RETRY_S = 60.0  # a periodic snapshot the database refused is tried again this much later, not every tick
IDLE_TICK_S = 5.0  # the upkeep's tick with sync off (`sync_interval_s` 0)
# Own calls learned live whose place in the log no sync has seen yet (`Covered.live`, kept in every snapshot) that
# make a sync with sync off: it marks them, so they cost bounded memory, not one id per call served for ever.
UNMARKED_SYNC = 10_000


@dataclass
class _Outage:
    """The database failing under the upkeep: what it said, since when and when it was last said (monotonic s)."""

    what: str
    since: float
    said_at: float


def _failing(failure: BaseException, outage: _Outage | None, tick: float) -> _Outage:
    """Say a database failure when it starts (or changes), then once every OUTAGE_REPEAT_S while it lasts."""
    what, now = describe_database_error(failure), time.monotonic()
    if outage is not None and outage.what == what and now - outage.said_at < OUTAGE_REPEAT_S:
        return outage
    log.error(  # one line: the driver's message is the news; the stack, the same at every tick, is not
        "the database is failing (%s): snapshots, sharing and the heartbeat wait for it, calls are still served"
        " and learned; retried every %gs",
        what,
        tick,
    )
    return _Outage(what, now if outage is None else outage.since, now)


class Upkeep:
    """What a running toolwise does on a timer beside serving (`run`, its one task), over its services."""

    def __init__(self, services: Services) -> None:
        self.services = services
        self.settings = services.settings
        self.feedback, self.learning = services.feedback, services.learning
        self.sharing, self.snapshots = services.sharing, services.snapshots
        self.started_at = utcnow()

    async def run(self) -> None:
        await self._start_up()
        settings = self.settings
        tick = settings.sync_interval_s or IDLE_TICK_S
        last_snapshot = last_heartbeat = time.monotonic()
        retry_at = 0.0  # no periodic snapshot before then: the last one failed (monotonic s)
        outage: _Outage | None = None  # the database failing the ticks, since when
        while True:
            await asyncio.sleep(tick)
            try:
                await self.snapshots.follow_restores()
                if settings.sync_interval_s or self.learning.unmarked >= UNMARKED_SYNC:
                    await self.sharing.sync()
                interval = settings.snapshot_interval_s
                by_time = interval and time.monotonic() - last_snapshot >= interval
                by_rows = settings.snapshot_rows and self.learning.state.unsnapshotted >= settings.snapshot_rows
                if (by_time or by_rows) and time.monotonic() >= retry_at:
                    last_snapshot = time.monotonic()
                    retry_at = last_snapshot + SNAPSHOT_RETRY_S  # each try copies and packs the whole state
                    await self.snapshots.save("periodic")
                    retry_at = 0.0
                    await self.prune()
                if time.monotonic() - last_heartbeat >= HEARTBEAT_S:
                    last_heartbeat = time.monotonic()
                    await self.heartbeat()
            except DATABASE_FAILURES as failure:  # the user's situation, not a bug: a line, not a traceback a tick
                outage = _failing(failure, outage, tick)
                continue
            except Exception:
                log.exception("upkeep failed (learning goes on; retried in %.1fs)", tick)
                continue
            if outage is not None:
                log.info(
                    "the database answers again after %.0fs failing: upkeep goes on", time.monotonic() - outage.since
                )
                outage = None

    async def _start_up(self) -> None:
        """Load the newest snapshot, embed the catalogue, learn the log after it, while calls are served; each
        step's failure logged and the next taken."""
        settings = self.settings
        try:
            loaded = await self.snapshots.load_latest()
            log.info("learned state: %s; serving the policy once the log after it is learned", loaded)
        except Exception:
            log.exception("loading the newest snapshot failed: learning the whole log instead")
        try:  # calls are learned once the tools' documents are embedded: never with their cosine missing
            await self.learning.catalogue_taken()
        except Exception:
            log.exception("embedding the tools' documents failed: BM25 alone scores them until the next change")
        self.learning.end_loading()
        try:  # then learn the log after it, likewise
            await self.snapshots.catch_up(settings.snapshot_rows)
        except Exception:
            log.exception("catching up with the log failed (the next sync resumes it)")
        try:  # this start added a row: the oldest gone instances' rows go (one per start otherwise, for ever)
            await self.feedback.instances.prune(self.learning.namespace)
        except Exception:
            log.exception("pruning the rows of stopped instances failed (the next start tries again)")
        heap.settle()  # the state loaded and learned, the catalogue embedded: out of the collections' walks

    async def prune(self) -> int:
        """Retention: delete executions older than the TTL whose effect the newest snapshot holds."""
        days = self.settings.retention_days
        newest = await self.feedback.snapshots.get(namespace=self.learning.namespace) if days else None
        if days is None or newest is None:
            return 0
        before = utcnow() - timedelta(days=days)
        floor = int(newest.covered["executions"]["floor"])
        deleted = await self.feedback.log.prune(before, namespace=self.learning.namespace, max_seq=floor)
        if deleted:
            log.info("retention: pruned %d executions older than %s", deleted, before.isoformat())
        return deleted

    async def status(self) -> dict[str, Any]:
        """What this instance reports about itself (heartbeat, `toolwise inspect status`)."""
        stats = await learning_stats(self.services)
        return {
            "policy": stats.policy,
            "serving": stats.serving,
            "flags": stats.flags,
            "downstreams": [asdict(h) for h in stats.downstreams],
            "open_circuits": stats.open_circuits,
            "shielded_tools": stats.shielded_tools,
            "tools": stats.tools,
            "calls": stats.calls,
            "decisions": stats.decisions,
            "updates": stats.updates,
            "synced": stats.synced,
            "snapshot": stats.snapshot_id,
            "store": stats.store,
            "epsilon": stats.epsilon,
            "epsilon_reason": stats.epsilon_reason,
            "drifts": stats.drifts,
        }

    async def heartbeat(self, *, stopped: bool = False) -> None:
        status = await self.status()
        now = utcnow()
        await self.feedback.instances.heartbeat(
            InstanceStatus(
                id=self.learning.instance_id,
                namespace=self.learning.namespace,
                host=socket.gethostname(),
                pid=os.getpid(),
                started_at=self.started_at,
                heartbeat_at=now,
                status=status,
                stopped_at=now if stopped else None,
            )
        )

    async def gauges(self) -> dict[str, tuple[str, float]]:
        stats = await learning_stats(self.services)
        return {
            "exploration_rate": ("Share of recommendations that explored.", stats.exploration_rate or 0.0),
            "exploration_epsilon": ("The adaptive exploration rate now (rises when rewards fall).", stats.epsilon),
            "reopened_tools": ("Tools the drift guard re-opened to exploration.", len(stats.reopened_tools)),
            "decisions": ("Recommendations made since start.", stats.decisions),
            "learner_updates": ("Updates the learner has made.", stats.updates),
            "queue_depth": ("Execution records waiting for group commit.", stats.queued_records + stats.pending),
            "flush_failures": ("Group-commit batches the database refused.", stats.failed_batches),
            "dead_lettered": ("Records written to the dead-letter file.", stats.dead_lettered),
            "store_failing": ("1 while the database refuses writes (see the log for why).", stats.store_failing),
            "open_circuits": ("Downstreams whose circuit is open.", len(stats.open_circuits)),
            "downstreams_ready": ("Downstreams serving.", sum(h.state == "ready" for h in stats.downstreams)),
            "shielded_tools": ("Tools dropped from recommendations by the shields.", len(stats.shielded_tools)),
        }
