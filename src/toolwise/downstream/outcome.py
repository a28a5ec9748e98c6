"""A call's outcome for its record: what its answer (or why there is none) says, in the execution's names."""

from __future__ import annotations

from dataclasses import dataclass

import mcp_types as types


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What a call's answer (or why there is none) says for its record, in the execution's names."""

    error_type: str | None = None  # None: the call succeeded
    error_message: str | None = None
    result_size: int = 0  # characters of text in the result

    @property
    def success(self) -> bool:
        return self.error_type is None


def outcome_of(result: types.CallToolResult | None, error: BaseException | None) -> CallOutcome:
    """The outcome of a call from its answer, or from why there is none."""
    if error is not None:
        return CallOutcome(type(error).__name__, str(error))
    assert result is not None
    size = sum(len(block.text) for block in result.content if isinstance(block, types.TextContent))
    if result.is_error:
        message = next((b.text for b in result.content if isinstance(b, types.TextContent)), "")
        return CallOutcome("ToolError", message[:2000], size)
    return CallOutcome(result_size=size)
