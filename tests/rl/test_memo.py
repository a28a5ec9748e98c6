from __future__ import annotations

import pytest

from toolwise.rl.memo import Memo


def test_the_least_recently_used_entry_is_forgotten_first() -> None:
    memo: Memo[str, int] = Memo(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # now the most recent
    memo.put("c", 3)
    assert "b" not in memo and memo.get("a") == 1 and memo.get("c") == 3
    assert len(memo) == 2
    with pytest.raises(ValueError, match="at least one entry, got capacity 0"):
        Memo(0)
