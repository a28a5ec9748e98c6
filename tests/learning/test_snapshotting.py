"""A restore is the state an instance ends with, whatever ran beside it: a restore made here while the
upkeep follows another process's restore, or made while the start-up's replay of the log is under way.
In-process against a real SQLite file, the services as the server runs them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.test_persistence import QUERIES, TOOLS, call, service, settings, teach
from toolwise.feedback import FeedbackService, StoreUnavailableError
from toolwise.feedback.records import SnapshotRecord
from toolwise.server.services import Services

SETTLE_S = 2.0  # how long a restore started beside another is given to run (it waits for the other, once mended)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_a_restore_made_here_is_not_undone_by_following_an_older_one(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=2)
    older = await services.snapshots.save("manual")
    await teach(services, rounds=2, prefix="later-")
    wanted = await services.snapshots.save("manual")
    assert wanted.sample_count > older.sample_count
    await services.snapshots.adopt(older, "restore")  # another process's restore, for `other` to follow

    other_feedback, other = await service(url)
    get = other_feedback.snapshots.get
    restoring: list[asyncio.Task[SnapshotRecord]] = []

    async def read_while_restoring(*args: Any, **kwargs: Any) -> SnapshotRecord | None:
        """The admin restores `wanted` here while the upkeep reads the older restore it follows."""
        if not restoring:
            restoring.append(asyncio.create_task(other.snapshots.adopt(wanted, "restore")))
            await asyncio.wait(restoring, timeout=SETTLE_S)
        return await get(*args, **kwargs)

    other_feedback.snapshots.get = read_while_restoring  # type: ignore[method-assign]  # the interleaving
    await other.snapshots.follow_restores()
    await restoring[0]
    newest = (await other_feedback.snapshots.list())[0]
    assert newest.source == "restore" and newest.sample_count == wanted.sample_count
    assert other.learning.learner.updates == wanted.sample_count  # the state is the restore the admin made
    await other_feedback.aclose()
    await feedback.aclose()


@pytest.mark.parametrize("policy", ["outcome", "ucb"])  # the replay by columns, and step by step (a TD policy)
async def test_a_restore_during_the_start_ups_replay_is_not_replayed_on_top_of(url: str, policy: str) -> None:
    feedback, first = await service(url, policy=policy)
    await teach(first, rounds=2)
    saved = await first.snapshots.save("manual")
    await teach(first, rounds=6, prefix="later-")
    await feedback.aclose()

    feedback, second = await service(url, policy=policy)
    reads = feedback.reads

    def restored_after_the_first_batch(read: Any) -> Any:
        """The log's batches as `read` gives them, 4 at a time; the admin restores `saved` once the first is learned."""

        async def batches(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            restored = False
            async for batch in read(*args, batch=4, **{k: v for k, v in kwargs.items() if k != "batch"}):
                yield batch
                if not restored:
                    restored = True
                    await second.snapshots.adopt(saved, "restore")

        return batches

    reads.iter_log = restored_after_the_first_batch(reads.iter_log)  # type: ignore[method-assign]
    reads.iter_log_columns = restored_after_the_first_batch(reads.iter_log_columns)  # type: ignore[method-assign]
    await second.snapshots.catch_up()
    assert second.learning.learner.updates == saved.sample_count  # the restore, nothing of the log on top
    await feedback.aclose()


async def test_a_restore_whose_caller_goes_away_is_finished_and_not_followed_again(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    await teach(services, rounds=2, prefix="later-")
    store = feedback.snapshots.save
    storing = asyncio.Event()

    async def save(snapshot: SnapshotRecord, *, keep: int) -> int:
        storing.set()  # the restored state is installed by now; the client's timeout comes while it is stored
        return await store(snapshot, keep=keep)

    feedback.snapshots.save = save  # type: ignore[method-assign]  # the moment the client goes away
    restoring = asyncio.create_task(services.snapshots.adopt(saved, "restore"))
    await storing.wait()
    restoring.cancel()
    await asyncio.wait([restoring])
    await call(services, "after", QUERIES[1], "git__git_log")  # learned into the restored state
    await services.snapshots.follow_restores()  # the upkeep's next tick
    assert services.learning.learner.updates == saved.sample_count + 1  # the call after the restore stays learned
    newest = (await feedback.snapshots.list())[0]
    assert newest.source == "restore" and newest.sample_count == saved.sample_count
    await feedback.aclose()


async def test_an_instance_following_a_restore_learns_its_own_calls_made_since_it(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    other_feedback, other = await service(url)
    await services.snapshots.adopt(saved, "restore")
    await call(other, "meanwhile", QUERIES[1], "git__git_log")  # after the restore, before `other` follows it
    await call(services, "there", QUERIES[1], "git__git_log")  # the restoring instance's, likewise
    await feedback.flush()  # in the log, for `other` to read
    await other.snapshots.follow_restores()
    await other.sharing.sync()
    await services.sharing.sync()
    assert services.learning.learner.updates == saved.sample_count + 2  # the restore and both calls after it
    assert other.learning.learner.updates == saved.sample_count + 2  # its own call too, not only the other's
    await other_feedback.aclose()
    await feedback.aclose()


async def test_an_instance_following_a_restore_learns_its_own_ratings_made_since_it(url: str) -> None:
    feedback, services = await service(url)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    other_feedback, other = await service(url)
    await services.snapshots.adopt(saved, "restore")
    await call(other, "meanwhile", QUERIES[1], "git__git_log")
    await other.agent.rate(other.learning.sessions.get("meanwhile"), 5, None, "git__git_log", None)
    await other.snapshots.follow_restores()
    await other.sharing.sync()
    await services.sharing.sync()
    assert services.learning.learner.updates == saved.sample_count + 2  # the restore, the call and its rating
    assert other.learning.learner.updates == saved.sample_count + 2  # its own rating too
    await other_feedback.aclose()
    await feedback.aclose()


async def test_an_instance_following_a_restore_learns_its_own_session_ends_made_since_it(url: str) -> None:
    feedback, services = await service(url, policy="ucb")  # a TD policy: it learns a session's end
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    other_feedback, other = await service(url, policy="ucb")
    await services.snapshots.adopt(saved, "restore")
    await call(other, "meanwhile", QUERIES[1], "git__git_log")
    ended = other.learning.learner.updates
    await other.agent.end_session("meanwhile", "success")
    assert other.learning.learner.updates == ended + 1  # a session's end is an update of its own
    await other.snapshots.follow_restores()
    await other.sharing.sync()
    await services.sharing.sync()
    assert services.learning.learner.updates == saved.sample_count + 2  # the restore, the call and its end
    assert other.learning.learner.updates == saved.sample_count + 2  # its own end too
    await other_feedback.aclose()
    await feedback.aclose()


async def test_calls_learned_before_a_restore_but_not_yet_committed_are_not_learned_again_on_top_of_it(
    url: str,
) -> None:
    feedback = FeedbackService(url, flush_interval_ms=60_000)  # queued records wait for a flush to commit
    await feedback.start()
    services = Services.open(settings(url), feedback)
    await services.learning.set_tools(TOOLS)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    for i in range(3):  # learned into the state the restore replaces, queued for the store, not committed
        await call(services, f"before-{i}", QUERIES[1], "git__git_log")
    await services.snapshots.adopt(saved, "restore")
    await services.sharing.sync()
    assert services.learning.learner.updates == saved.sample_count  # the restore, nothing learned again on top
    await call(services, "after", QUERIES[1], "git__git_log")
    await services.sharing.sync()
    assert services.learning.learner.updates == saved.sample_count + 1  # a call after it, learned once
    await feedback.aclose()


async def test_a_restore_another_process_made_is_followed_at_the_next_tick_after_the_store_refused_it(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The upkeep follows another process's restore; a tick whose read of it the store refused (a connection
    lost, a timeout) counted it followed all the same, and the instance kept serving the state the admin
    rolled back from until its next restart."""
    feedback, services = await service(url)
    await teach(services, rounds=2)
    saved = await services.snapshots.save("manual")
    await teach(services, rounds=2, prefix="later-")
    other_feedback, other = await service(url)
    await teach(other, rounds=1, prefix="other-")
    await services.snapshots.adopt(saved, "restore")
    get = other_feedback.snapshots.get

    async def refused(*args: Any, **kwargs: Any) -> SnapshotRecord | None:
        raise StoreUnavailableError("the database did not answer in time")

    monkeypatch.setattr(other_feedback.snapshots, "get", refused)
    with pytest.raises(StoreUnavailableError):
        await other.snapshots.follow_restores()  # the upkeep logs it and tries again at its next tick
    monkeypatch.setattr(other_feedback.snapshots, "get", get)
    await other.snapshots.follow_restores()
    assert other.learning.learner.updates == saved.sample_count
    await other_feedback.aclose()
    await feedback.aclose()


async def test_a_snapshot_restored_into_another_namespace_is_stored_in_the_namespace_restored(url: str) -> None:
    """A snapshot file carries the namespace it was dumped from; restored by an instance of another namespace
    (seeding a new one), it becomes that namespace's state, stored there: before, it was stored under the file's
    namespace, so `snapshot list` of the namespace restored showed nothing and the file's namespace's servers
    followed it as a restore of their own, replacing what they had learned."""
    feedback, default = await service(url)
    await teach(default, rounds=2)
    dumped = default.snapshots.snapshot("manual")
    assert dumped.namespace == "default"
    team_feedback, team = await service(url, namespace="team")
    restored = await team.snapshots.adopt(dumped, "restore")
    assert restored.namespace == "team"
    assert [r.id for r in await team_feedback.snapshots.list("team")] == [restored.id]
    assert [r.source for r in await feedback.snapshots.list("default")] == []  # the file's namespace: untouched
    await team_feedback.aclose()
    await feedback.aclose()


async def test_a_snapshot_toolwise_takes_of_an_unchanged_state_is_not_stored_again(url: str) -> None:
    """Each restart (a client's every launch) and each idle `snapshot_interval_s` stored the same state
    again: five idle ticks left `snapshot_keep` copies of it and no earlier snapshot to roll back to."""
    feedback, services = await service(url)
    await teach(services, rounds=2)
    first = await services.snapshots.save("periodic")
    again = await services.snapshots.save("periodic")  # nothing learned since
    for _ in range(3):
        await services.snapshots.save("shutdown")
    manual = [await services.snapshots.save("manual") for _ in range(2)]  # asked for: stored each time
    await teach(services, rounds=1, prefix="later-")
    changed = await services.snapshots.save("periodic")
    listed = await feedback.snapshots.list()
    assert [r.source for r in listed] == ["periodic", "manual", "manual", "periodic"]
    assert again.id == first.id and services.snapshots.snapshot_id == changed.id != first.id
    assert len({m.id for m in manual}) == 2
    await feedback.aclose()


@pytest.mark.parametrize("signed", [False, True], ids=["unsigned", "snapshot_sign_key"])
async def test_an_idle_launch_stores_the_unchanged_state_once(url: str, tmp_path: Path, signed: bool) -> None:
    """A launch with no call that outlasts `snapshot_interval_s`: its periodic snapshots, its shutdown's (stored
    undeflated), then the next launch's periodic and shutdown ones, all of one state, are stored once; with
    `snapshot_sign_key` too. Before, a shutdown's after a periodic one (or the reverse) was stored again, its
    checksum that of other bytes, and with a signing key every one was: its signature covers its own time."""
    keys: dict[str, Any] = {}
    if signed:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        key = tmp_path / "sign.pem"
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        key.write_bytes(pem)
        keys["snapshot_sign_key"] = key
    feedback, services = await service(url, **keys)
    await teach(services, rounds=2)
    await services.snapshots.save("shutdown")
    await feedback.aclose()
    for _ in range(2):  # the next launches: no call
        feedback, services = await service(url, **keys)
        await services.snapshots.restore_latest()
        for source in ("periodic", "periodic", "shutdown"):
            await services.snapshots.save(source)
        listed = [r.source for r in await feedback.snapshots.list()]
        await feedback.aclose()
    # The first launch's shutdown listed its calls as not yet seen in the log; the next start's state counts them
    # among the log's: what it covers changed form, stored once.
    assert listed == ["periodic", "shutdown"]
