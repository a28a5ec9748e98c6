"""The log read off-policy evaluation walks: every execution with its decision's propensity and its
reward, oldest first, in batches of columns along `(namespace, seq)` (bounded memory however long
the log; no object a row)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from toolwise.feedback.database import Database
from toolwise.feedback.reads import column_batches
from toolwise.feedback.records import CallColumns


@dataclass(slots=True, frozen=True)
class DecisionColumns(CallColumns):
    """A run of the log as columns, with each call's decision. `decision_id` is set on a call that
    followed a recommendation; `propensity` only when the called tool was the one chosen."""

    decision_id: Sequence[str | None]
    propensity: Sequence[float | None]
    reward: Sequence[float | None]


async def iter_decision_columns(
    database: Database, *, namespace: str = "default", after_seq: int = 0, batch: int = 2000
) -> AsyncGenerator[DecisionColumns, None]:
    """The namespace's executions after `after_seq`, oldest first, in batches of columns."""
    async for columns in column_batches(database, DecisionColumns, namespace, after_seq, batch):
        yield columns
