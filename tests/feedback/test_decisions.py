"""The log read of off-policy evaluation: every execution of the namespace, oldest first, in batches
of columns, with each decision's propensity and reward."""

from __future__ import annotations

from tests.feedback.conftest import make_execution
from toolwise.feedback import FeedbackService
from toolwise.feedback.decisions import iter_decision_columns


async def test_the_decision_log_is_walked_in_order_across_batches_with_propensities(service: FeedbackService) -> None:
    for i in range(20):
        followed = i % 3 == 0
        execution = make_execution(
            f"s__t{i % 4}",
            session_id=f"s{i}",
            decision_id=f"d{i}" if followed else None,
            propensity=0.5 if followed else None,
            reward=float(i),
        )
        await service.log.record_execution(execution)
    await service.log.record_execution(make_execution("s__other", namespace="elsewhere", reward=1.0))
    batches = [b async for b in iter_decision_columns(service.database, batch=7)]
    assert [len(b) for b in batches] == [7, 7, 6]
    rewards = [r for b in batches for r in b.reward]
    assert rewards == [float(i) for i in range(20)]
    propensities = [p for b in batches for p in b.propensity]
    assert propensities == [0.5 if i % 3 == 0 else None for i in range(20)]
    assert [t for b in batches for t in b.tool][:5] == ["s__t0", "s__t1", "s__t2", "s__t3", "s__t0"]
