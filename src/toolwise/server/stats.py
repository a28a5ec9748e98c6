"""What a running toolwise knows about itself, assembled once: the `get_learning_stats` tool, the
instance's heartbeat status (`toolwise inspect status`) and the Prometheus gauges all read it."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from toolwise.downstream.connection import Health
from toolwise.rl import Learner
from toolwise.server.services import Services

FLAGS = ("shadow", "learning", "replay", "sequences")  # capability settings the status reports


@dataclass(frozen=True, slots=True)
class LearnedStats:
    """The part of the statistics the learning thread changes, read there (`learning_stats`)."""

    policy: str
    tools: int
    updates: int
    mean_update_reward: float | None
    replay_size: int
    sequences: int
    epsilon: float  # the adaptive exploration rate now (rl/exploration.py)
    epsilon_reason: str
    reopened_tools: list[str]  # tools the drift guard re-opened
    drifts: list[str]  # the newest changes it saw, in words


@dataclass(frozen=True, slots=True)
class LearningStats(LearnedStats):
    """All the statistics: what the learning thread changes (`LearnedStats`), and the rest, the event loop's."""

    serving: str  # what answers recommend_tool: the policy, the baseline (shadow mode) or the prior (catching up)
    namespace: str
    instance: str
    flags: dict[str, bool]
    decisions: int
    explored: int
    calls: int
    open_sessions: int
    pending: int  # calls noted, not yet recorded and learned
    queued_records: int  # records waiting for group commit
    committed_records: int
    failed_batches: int
    dead_lettered: int
    store: str  # `ok`, or since when and why the database refuses records
    store_failing: bool
    synced: int
    snapshot_id: int | None
    downstreams: list[Health]
    shielded_tools: dict[str, str]
    open_circuits: list[str]
    mean_reward: float | None = None  # per recorded call: read from the store, only by the tool that reports it

    @property
    def exploration_rate(self) -> float | None:
        return self.explored / self.decisions if self.decisions else None


def _learned(learner: Learner) -> LearnedStats:
    exploration = learner.exploration
    return LearnedStats(
        policy=learner.policy.name,
        tools=len(learner.index.active),
        updates=learner.updates,
        mean_update_reward=learner.reward_sum / learner.updates if learner.updates else None,
        replay_size=len(learner.replay),
        sequences=len(learner.sequences),
        epsilon=exploration.epsilon,
        epsilon_reason=exploration.reason,
        reopened_tools=exploration.open_tools(),
        drifts=[
            f"{d.tool}: rewards {d.direction} at call {d.at_call:,} ({d.before:.2f} → {d.after:.2f})"
            for d in exploration.drifts[-5:]
        ],
    )


async def learning_stats(services: Services) -> LearningStats:
    """The statistics as they are now, from memory (no database query). What the learning thread changes
    is read holding the lock (`LearningThread.read`: beside the event loop while the thread learns a run of
    calls, so the loop serves on meanwhile); the rest (the loop's own) is read on the loop."""
    learning = services.learning
    learned = await learning.read_learned(_learned)
    writer, state = services.feedback.stats, learning.state
    health = services.catalogue.health()
    return LearningStats(
        **asdict(learned),
        serving=learning.serving,
        namespace=learning.namespace,
        instance=learning.instance_id,
        flags={name: getattr(services.settings, name) for name in FLAGS},
        decisions=state.decisions,
        explored=state.explored,
        calls=state.calls + learning.pending,  # learned, and noted but not yet learned
        open_sessions=len(learning.sessions),
        pending=learning.pending,
        queued_records=writer.queue_depth,
        committed_records=writer.committed,
        failed_batches=writer.failed_batches,
        dead_lettered=writer.dead_lettered,
        store=writer.health(),
        store_failing=writer.failing is not None,
        synced=services.sharing.synced,
        snapshot_id=services.snapshots.snapshot_id,
        downstreams=health,
        shielded_tools=learning.shields.blocked(time.monotonic()),
        open_circuits=[h.server for h in health if h.circuit != "closed"],
    )
