"""Figures a user reads say what scale they are on, and no figure is shown that means nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.test_persistence import QUERIES, service, teach
from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.learning.service import LearningService
from toolwise.rl import Decision, Ranked
from toolwise.server.recommend import Evidence, RecommendToolInput, confidence_of, reason_of, recommend_tool


def test_a_reason_shows_the_expected_reward_on_the_0_to_1_scale_the_help_promises() -> None:
    """The semantic policy's estimate is a regression's and can overshoot 1 (1.08 was seen)."""
    over = Ranked("t__a", score=1.3, expected=1.08, prior=0.9)
    under = Ranked("t__b", score=0.1, expected=-0.2, prior=0.1)
    decision = Decision("d", "semantic", "h" * 64, "t__a", [over, under], explored=False, propensity=1.0)
    assert reason_of(decision, over, Evidence(0, 2)) == "relevance 0.90, expected reward 1.00 of 1"
    assert reason_of(decision, under, Evidence(0, 2)) == "relevance 0.10, expected reward 0.00 of 1"


def test_a_probability_is_as_sure_as_the_calls_learned_behind_it() -> None:
    """The choice model's softmax says 0.9 before a call was learned: reported, it starts uniform over
    the tools and reaches the model's own figure as calls are learned."""
    top = Ranked("t__a", score=12.0, expected=0.9, prior=0.4)
    decision = Decision("d", "choice", "h" * 64, "t__a", [top], explored=False, propensity=1.0)
    shown = [confidence_of(decision.policy, top.expected, Evidence(n, 10)) for n in (0, 4, 100, 10_000)]
    assert shown[0] == 0.1 and shown[1] < 0.3 and shown[2] > 0.7 and round(shown[3], 2) == 0.9
    assert reason_of(decision, top, Evidence(4, 10)) == f"relevance 0.40, probability {shown[1]:.2f} it is the one"


def test_serving_says_what_it_catches_up_with_before_the_replay_is_counted() -> None:
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:", embedding="none")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    learning.progress.begin_replay()
    assert learning.serving == "prior (catching up: reading the log after the newest snapshot)"
    learning.progress.to_replay(5000)
    learning.progress.replayed(1200)
    assert learning.serving == "prior (catching up: 1,200 of 5,000 log entries replayed)"


async def test_a_probability_rests_on_the_calls_of_the_state_that_decided_though_a_restore_lands_before_the_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    feedback, services = await service(f"sqlite+aiosqlite:///{tmp_path / 'toolwise.db'}", policy="choice")
    empty = await services.snapshots.save("manual")  # nothing learned yet
    await teach(services, rounds=4)
    learned = services.learning.learner.updates
    decide = services.agent.recommend_with_arguments
    decided: list[Decision] = []

    async def restored_meanwhile(*args: Any, **kwargs: Any) -> Any:
        found = await decide(*args, **kwargs)
        decided.append(found[0])
        await services.snapshots.adopt(empty, "restore")  # swapped in before the answer is put together
        return found

    monkeypatch.setattr(services.agent, "recommend_with_arguments", restored_meanwhile)
    session = services.learning.sessions.get("asker")
    answer = await recommend_tool(services, RecommendToolInput(query=QUERIES[1]), session)
    await feedback.aclose()
    [decision] = decided
    assert learned > 0 and services.learning.learner.updates == 0  # the restore landed
    choices = len(services.learning.learner.index.active)
    shown = confidence_of(decision.policy, decision.ranked[0].expected, Evidence(learned, choices))
    assert answer.recommendations[0].confidence == pytest.approx(shown)  # before: uniform, the restored state's 0 calls
