"""rl/several.py: what one tool's success at a request says of another's."""

from __future__ import annotations

import numpy as np
import pytest

from toolwise.rl.several import Several


def request(i: int) -> np.ndarray:
    x = np.zeros(8)
    x[i % 8] = 1.0
    x[(i + 3) % 8] += 0.5 + i / 100
    return x / np.linalg.norm(x)


def test_a_second_tool_that_fails_where_the_first_worked_reads_as_one_right_tool_per_request() -> None:
    """The first call at each request works; a second tool called there works a quarter of the time (a
    wrong tool's lucky call): about half as often as a tool called where another failed (always)."""
    one = Several()
    for i in range(40):
        one.count(request(i), 0, 1.0)
        one.count(request(i), 1, 1.0 if i % 4 == 0 else 0.0)
        one.count(request(100 + i), 2, 0.0)
        one.count(request(100 + i), 3, 1.0)
    assert one.alike() == pytest.approx(0.25, abs=0.05)


def test_a_second_tool_that_works_where_the_first_worked_reads_as_several_right_tools() -> None:
    several = Several()
    for i in range(40):
        several.count(request(i), 0, 1.0)
        several.count(request(i), 1, 1.0)
        several.count(request(100 + i), 2, 0.0)
        several.count(request(100 + i), 3, 1.0)
    assert several.alike() > 0.95


def test_nothing_seen_reads_as_one_right_tool_and_the_same_tool_again_is_no_pair() -> None:
    seen = Several()
    assert seen.alike() == 0.5
    for _ in range(5):
        seen.count(request(1), 0, 1.0)
    seen.count(np.zeros(8), 1, 1.0)  # no request: nothing to pair
    assert seen.alike() == 0.5


def test_a_rating_revises_the_pair_its_call_counted_in() -> None:
    """A second tool's call "worked" and was then rated 1: counted as the failure it was."""
    rated, failed = Several(), Several()
    for seen, fit in ((rated, 1.0), (failed, 0.0)):
        seen.count(request(2), 0, 1.0)
        seen.count(request(2), 1, fit)
    rated.revise(request(2), 1, -1.0)
    np.testing.assert_array_equal(rated.pairs, failed.pairs)
    copy = Several()
    copy.load_state(rated.state_dict())
    assert copy.alike() == rated.alike()
