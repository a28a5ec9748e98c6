"""Ending a session tells a TD learner that its last step was terminal: the value of that step is no
longer bootstrapped from a next step that never came (bandits have no future term: nothing to learn)."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from alembic import command

from tests.server.test_persistence import proxied, service
from toolwise.downstream.errors import CallCancelledError
from toolwise.downstream.outcome import outcome_of
from toolwise.feedback import FeedbackService, utcnow
from toolwise.feedback.migrate import alembic_config
from toolwise.learning.watermark import Covered
from toolwise.server.services import Services


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"


async def test_ending_a_session_learns_its_last_call_as_a_terminal_transition(url: str) -> None:
    feedback, services = await service(url, policy="ucb")
    for tool in ("git__git_status", "git__git_log"):
        proxied(services, "s", tool)
    await services.learning.drain()
    learner = services.learning.learner
    terminal = [t for t in learner.replay.items if t is not None and t.next_context < 0]
    assert terminal == []  # both calls were learned with a future term
    updates = learner.updates
    await services.agent.end_session("s", "success")
    terminal = [t for t in learner.replay.items if t is not None and t.next_context < 0]
    assert [learner.index.tools.names[t.tool] for t in terminal] == ["git__git_log"]
    assert learner.updates == updates + 1
    await feedback.aclose()


async def test_ending_a_session_adds_nothing_for_a_bandit(url: str) -> None:
    feedback, services = await service(url)  # the default policy, a contextual bandit
    proxied(services, "s", "git__git_log")
    await services.learning.drain()
    updates = services.learning.learner.updates
    await services.agent.end_session("s", "success")
    assert services.learning.learner.updates == updates
    await feedback.aclose()


@pytest.fixture(params=["sqlite", "postgresql"])
def log(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """Where the shared log is: a real SQLite file, or a namespace of its own on the real PostgreSQL."""
    if request.param == "sqlite":
        return {"database_url": f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}"}
    return {"database_url": request.getfixturevalue("pg_url"), "namespace": f"test-{uuid.uuid4().hex[:8]}"}


async def ucb(log: dict[str, str]) -> tuple[FeedbackService, Services]:
    """A start of toolwise on `log` with the tabular Q-learner (a TD policy: ends teach it)."""
    settings = dict(log)
    return await service(settings.pop("database_url"), policy="ucb", **settings)


def cancelled(services: Services, session_id: str, tool: str) -> str:
    """A proxied call the client cancelled, noted as `server/handlers.py`'s `forward` notes it."""
    return services.learning.note(
        services.learning.sessions.get(session_id),
        tool=tool,
        server=tool.split("__", maxsplit=1)[0],
        arguments=None,
        outcome=outcome_of(None, CallCancelledError("cancelled by the client")),
        started_at=utcnow(),
        latency_ms=500.0,
    )


SESSIONS = [  # one after the other, as a user works; "-" marks a call the client cancelled
    ("a", ["git__git_status", "git__git_log"]),
    ("b", ["git__git_diff", "-time__get_current_time", "git__git_log"]),
    ("c", ["time__get_current_time", "-git__git_status"]),  # ends on a cancelled call: nothing to end
    ("d", ["git__git_log", "git__git_diff", "git__git_status"]),
]


async def work(services: Services, sessions: list[tuple[str, list[str]]]) -> None:
    for session_id, tools in sessions:
        for tool in tools:
            if tool.startswith("-"):
                cancelled(services, session_id, tool[1:])
            else:
                proxied(services, session_id, tool)
        await services.agent.end_session(session_id, "success")


def terminal_tools(services: Services) -> list[str]:
    learner = services.learning.learner
    return sorted(
        learner.index.tools.names[t.tool] for t in learner.replay.items if t is not None and t.next_context < 0
    )


def assert_same_q_values(replayed: Services, live: Services) -> None:
    a, b = replayed.learning.learner, live.learning.learner
    assert a.updates == b.updates
    state_a, state_b = a.policy.state_dict()["table"], b.policy.state_dict()["table"]  # Q(s, a) and counts
    assert state_a["contexts"] == state_b["contexts"]
    for key in ("values", "counts", "visits"):
        np.testing.assert_allclose(state_a[key], state_b[key], rtol=1e-6, err_msg=key)


async def test_a_learner_catching_up_from_the_log_learns_the_ends_a_live_learner_learned(log: dict[str, str]) -> None:
    feedback, live = await ucb(log)
    await work(live, SESSIONS)
    assert terminal_tools(live) == ["git__git_log", "git__git_log", "git__git_status"]  # c's cancel ends nothing
    await feedback.aclose()

    feedback, replayed = await ucb(log)  # a fresh start on the same file: no snapshot
    await replayed.sharing.catch_up()
    assert terminal_tools(replayed) == terminal_tools(live)
    assert_same_q_values(replayed, live)
    updates = replayed.learning.learner.updates
    await replayed.sharing.sync()
    assert replayed.learning.learner.updates == updates  # each end learned once
    await feedback.aclose()


async def test_an_instance_syncing_learns_another_instances_episode_ends_once(log: dict[str, str]) -> None:
    feedback_a, a = await ucb(log)
    feedback_b, b = await ucb(log)
    await work(a, SESSIONS[:2])
    await b.sharing.sync()
    assert terminal_tools(b) == terminal_tools(a) == ["git__git_log", "git__git_log"]
    assert_same_q_values(b, a)
    await work(b, SESSIONS[2:])  # b's own ends are learned live, and by a at its sync
    await a.sharing.sync()
    await b.sharing.sync()
    assert terminal_tools(a) == terminal_tools(b) == ["git__git_log", "git__git_log", "git__git_status"]
    assert a.learning.learner.updates == b.learning.learner.updates  # nobody learned an end twice
    assert b.learning.covered.live == set() == a.learning.covered.live  # every own end seen in the log
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_an_end_learned_live_is_not_learned_again_after_a_restart_from_its_snapshot(log: dict[str, str]) -> None:
    feedback, live = await ucb(log)
    await work(live, SESSIONS[:1])
    await live.snapshots.save("shutdown")  # no sync ran: the end is marked as learned live
    updates = live.learning.learner.updates
    await feedback.aclose()

    feedback, restarted = await ucb(log)
    await restarted.snapshots.restore_latest()
    assert restarted.learning.learner.updates == updates
    assert terminal_tools(restarted) == ["git__git_log"]
    await feedback.aclose()


async def test_an_instance_that_adopted_a_snapshot_learns_the_ends_logged_after_it(log: dict[str, str]) -> None:
    feedback_a, a = await ucb(log)
    feedback_b, b = await ucb(log)
    await work(a, SESSIONS[:1])
    await b.sharing.sync()
    await b.snapshots.adopt(await b.snapshots.save("manual"), "restore")  # as `toolwise snapshot restore`
    await work(a, SESSIONS[1:2])  # logged after the restore: b's next sync learns its end
    await b.sharing.sync()
    assert terminal_tools(b) == terminal_tools(a) == ["git__git_log", "git__git_log"]
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_episodes_logged_before_ends_were_shared_are_learned_from_their_migrated_rows(
    log: dict[str, str],
) -> None:
    feedback, live = await ucb(log)
    await work(live, SESSIONS)
    async with feedback.engine.begin() as conn:  # back to the schema before 0006: episodes name no last call
        await conn.run_sync(lambda c: command.downgrade(alembic_config(c), "0005"))
    await feedback.aclose()

    feedback, replayed = await ucb(log)  # start-up migrates: each episode's last call is found again
    await replayed.sharing.catch_up()
    assert terminal_tools(replayed) == terminal_tools(live)
    assert_same_q_values(replayed, live)
    await feedback.aclose()


async def test_a_state_saved_before_ends_were_shared_learns_the_ends_logged_from_its_first_sync_on(
    log: dict[str, str],
) -> None:
    feedback_a, a = await ucb(log)
    feedback_b, b = await ucb(log)
    await work(a, SESSIONS[:1])
    old = {key: value for key, value in b.learning.covered.state().items() if key != "episodes"}
    b.learning.state.cover(Covered.of(old))  # b's state as loaded from a snapshot that predates episode ends
    await b.sharing.sync()
    assert terminal_tools(b) == []  # whether the old state had learned it is unknown: not learned twice
    await work(a, SESSIONS[1:2])
    await b.sharing.sync()
    assert terminal_tools(b) == ["git__git_log"]  # the end a logged after b synced once
    await feedback_a.aclose()
    await feedback_b.aclose()


async def test_a_replay_learns_no_cancelled_call_as_the_live_learner_did_not(log: dict[str, str]) -> None:
    settings = dict(log)
    url = settings.pop("database_url")
    feedback, live = await service(url, **settings)  # the default policy: a replay learns it batch by batch
    await work(live, SESSIONS)
    await live.learning.drain()
    await feedback.aclose()
    feedback, replayed = await service(url, **settings)  # a fresh start on the same log: no snapshot
    await replayed.sharing.catch_up()
    assert replayed.learning.learner.updates == live.learning.learner.updates == 8  # 10 calls, 2 cancelled
    await feedback.aclose()
