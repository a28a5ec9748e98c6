"""A query that names a tool outright (rl/names.py), and the search ranking that puts it first."""

from __future__ import annotations

import numpy as np

from toolwise.rl import Learner, ToolDoc
from toolwise.rl.names import NameIndex

NAMES = ["cat__uber_ride", "cat__uber_eat_order", "fs__read_file", "git__read_file", "cat__getWeather"]


def test_a_name_is_found_with_or_without_its_prefix_in_any_case_or_separator_style() -> None:
    index = NameIndex(NAMES)
    for query in ("uber.ride", "Uber Ride", "cat__uber_ride", "  UBER-RIDE ", "uber: {ride}"):
        assert index.named(query) == [0], query
    assert index.named("get weather") == [4]
    assert index.named("read_file") == [2, 3]  # two servers' tool of the same name: both
    assert index.named("order an uber ride") == [] and index.named("uber") == []


def test_a_search_ranks_the_named_tool_first_a_recommendation_does_not_change() -> None:
    others = [ToolDoc(f"cat__uber_{w}", f"Uber {w} ride uber") for w in "ab"]
    tools = [ToolDoc("cat__uber_ride", "Book a ride."), *others]
    learner = Learner(tools=tools)
    rng = np.random.default_rng(0)
    plain = learner.recommend("uber.ride", rng, baseline=True)
    assert plain.ranked[0].tool != "cat__uber_ride"  # lexically the others match better
    for baseline in (True, False):
        searched = learner.recommend("uber.ride", rng, baseline=baseline, named_first=True)
        assert searched.ranked[0].tool == "cat__uber_ride" and searched.ranked[0].prior == 1.0
