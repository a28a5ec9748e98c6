"""A full garbage collection while toolwise serves walks only what was made since it started: what start-up
built (the catalogue, the learner, the learned state loaded) is out of its way. A collection holds the GIL
while it walks, so the event loop waited for all of it (about 110 ms at 1,000 tools: docs/benchmarks.md)."""

from __future__ import annotations

import gc
from pathlib import Path

from tests.server.surface import running
from tests.server.test_learning_thread import caught_up


def walked(thing: object) -> bool:
    """Whether the cyclic garbage collector's collections visit `thing` (a frozen object they do not)."""
    return any(seen is thing for seen in gc.get_objects())


async def test_a_full_collection_while_serving_walks_nothing_start_up_built(tmp_path: Path) -> None:
    async with running(tmp_path) as (app, _):
        await caught_up(app)
        learner, tool = app.learning.learner, app.catalogue.tools()[0]
        assert gc.is_tracked(learner) and gc.is_tracked(tool)
        assert not walked(learner), "a full collection walks the learner"
        assert not walked(tool), "a full collection walks the catalogue"
    # stopped: its objects are collected again, so that a process that runs servers in turn frees their cycles
    assert walked(learner) and walked(tool)


async def test_an_app_stopping_leaves_the_heap_of_another_app_still_running_out_of_the_collections(
    tmp_path: Path,
) -> None:
    """Two apps in one process (an embedding program, the tests): the first to stop leaves what the other's
    start built frozen; what they built is walked again once the last of them stops."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with running(tmp_path / "a") as (app, _):
        await caught_up(app)
        learner = app.learning.learner
        async with running(tmp_path / "b") as (other, _):
            await caught_up(other)
        assert not walked(learner), "another app's stop had a full collection walk this app's learner"
    assert walked(learner)
