"""Figures a user reads say what scale they are on, and no figure is shown that means nothing."""

from __future__ import annotations

from toolwise.config import Settings
from toolwise.feedback import FeedbackService
from toolwise.learning.service import LearningService
from toolwise.rl import Decision, Ranked
from toolwise.server.tools import reason_of


def test_a_reason_shows_the_expected_reward_on_the_0_to_1_scale_the_help_promises() -> None:
    """The semantic policy's estimate is a regression's and can overshoot 1 (1.08 was seen)."""
    over = Ranked("t__a", score=1.3, expected=1.08, prior=0.9)
    under = Ranked("t__b", score=0.1, expected=-0.2, prior=0.1)
    decision = Decision("d", "semantic", "h" * 64, "t__a", [over, under], explored=False, propensity=1.0)
    assert reason_of(decision, over) == "relevance 0.90, expected reward 1.00 of 1"
    assert reason_of(decision, under) == "relevance 0.10, expected reward 0.00 of 1"


def test_serving_says_what_it_catches_up_with_before_the_replay_is_counted() -> None:
    settings = Settings(database_url="sqlite+aiosqlite:///:memory:", embedding="none")
    learning = LearningService(settings, FeedbackService(settings.database_url))
    learning.progress.begin_replay()
    assert learning.serving == "prior (catching up: reading the log after the newest snapshot)"
    learning.progress.to_replay(5000)
    learning.progress.replayed(1200)
    assert learning.serving == "prior (catching up: 1,200 of 5,000 log entries replayed)"
