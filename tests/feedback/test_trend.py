"""The reward trend's slices (`inspect progress`, the dashboard's learning curves)."""

from __future__ import annotations

from datetime import timedelta

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService, utcnow


async def test_a_slice_counts_how_often_the_recommended_tool_was_called(service: FeedbackService) -> None:
    # a call after a recommendation carries its decision; a propensity only when it called the tool recommended
    shapes = [("d1", 0.8), ("d2", None), ("d3", 0.5), (None, None), ("d4", 0.9)]
    for decision, propensity in shapes:
        await service.log.record_execution(make_execution(decision_id=decision, propensity=propensity, reward=1.0))
    (whole,) = await service.reports.trend(buckets=1)
    assert (whole.calls, whole.recommended, whole.followed) == (5, 4, 3)
    assert whole.followed_rate == 0.75


async def test_a_trend_after_a_seq_reads_only_the_newer_calls(service: FeedbackService) -> None:
    for i in range(6):
        await service.log.record_execution(make_execution(success=i >= 3, reward=1.0))
    (newer,) = await service.reports.trend(buckets=1, after_seq=3)
    assert (newer.calls, newer.success_rate) == (3, 1.0)
    (none_followed,) = await service.reports.trend(buckets=1)
    assert none_followed.followed_rate is None


async def test_the_first_seq_of_a_window_bounds_its_trend_to_the_same_slices(service: FeedbackService) -> None:
    old = make_execution(reward=-5.0)
    old.finished_at -= timedelta(days=3)
    await service.log.record_execution(old)
    for _ in range(4):
        await service.log.record_execution(make_execution(reward=10.0))
    since = utcnow() - timedelta(days=1)
    first = await service.reports.first_seq_since(since)
    assert first == 2 and await service.reports.first_seq_since(utcnow() + timedelta(days=1)) is None
    bounded = await service.reports.trend(since=since, buckets=3, after_seq=first - 1)
    assert bounded == await service.reports.trend(since=since, buckets=3)
    assert sum(b.calls for b in bounded) == 4
