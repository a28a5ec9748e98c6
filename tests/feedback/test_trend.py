"""The reward trend's slices (`inspect progress`, the dashboard's learning curves)."""

from __future__ import annotations

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService


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
