"""The next call as the agent makes it: every call counts, and a failed last call is its own context."""

from __future__ import annotations

import numpy as np
import pytest

from toolwise.rl import SequenceModel
from toolwise.rl.state import pack, unpack


def session(model: SequenceModel, calls: list[tuple[str, bool]]) -> None:
    """Feed one session's calls (tool, worked) as the learner does, with whether the one before failed."""
    for i, (tool, ok) in enumerate(calls):
        before = [t for t, _ in calls[:i]]
        model.observe_step(before, tool, 10.0 if ok else -5.0, ok, after_failure=i > 0 and not calls[i - 1][1])


def booking_sessions() -> SequenceModel:
    """Book after a search; a booking that fails is retried (twice in three), one that works is confirmed."""
    model = SequenceModel()
    for _ in range(3):
        session(model, [("search", True), ("book", False), ("book", True), ("confirm", True)])
    session(model, [("search", True), ("book", False), ("search", True), ("book", True), ("confirm", True)])
    for _ in range(2):
        session(model, [("search", True), ("book", True), ("confirm", True)])
    return model


def test_after_a_failed_call_the_agent_most_likely_retries_it() -> None:
    model = booking_sessions()
    retry = model.recommend_next(["search", "book"], after_failure=True)
    assert retry[0].tool == "book"
    assert retry[0].reason == "follows search → book (failed) → book (3×, 100% success)"
    assert retry[0].p_agent == retry[0].score and 0.5 < retry[0].p_agent < 1
    # every retry there worked (3 of 3), shrunk to book's own rate (6 of 10 worked: 7/12 smoothed)
    assert retry[0].p_works == pytest.approx((3 + 2 * 7 / 12) / (3 + 2))
    assert sum(model.agent_distribution(["search", "book"], after_failure=True).values()) == pytest.approx(1.0)

    worked = model.recommend_next(["search", "book"])  # the booking worked: what follows one that worked
    assert worked[0].tool == "confirm"
    assert worked[0].count == 3, "search → book → confirm, the booking having worked"
    assert model.agent_distribution(["search", "book"])["book"] < 0.05, "no booking that worked was retried"


def test_after_a_call_that_worked_what_followed_the_tool_at_all_comes_before_what_is_merely_frequent() -> None:
    """A tool whose follow-ups mostly came after its failures: once a call of it works, what followed it
    then comes first, and what followed the tool at all (failed or not) before the tools that are
    only called most."""
    model = SequenceModel()
    for _ in range(3):
        session(model, [("login", True), ("fetch", False), ("notify", True)])
    session(model, [("login", True), ("fetch", True), ("archive", True)])
    for _ in range(5):
        session(model, [("login", True), ("list", True), ("list", True)])
    worked = [r.tool for r in model.recommend_next(["login", "fetch"], top_k=3)]
    assert worked[:2] == ["archive", "notify"], "list and login are called most, never after fetch"


def test_a_model_of_the_calls_that_worked_alone_misses_the_retry() -> None:
    model = booking_sessions()
    worked = model.next_distribution(["search", "book"])  # what recommend_tool's sequence feature reads
    assert max(worked, key=worked.__getitem__) == "confirm"


def test_without_failure_flags_the_failed_context_backs_off_to_every_call() -> None:
    model = SequenceModel()
    for _ in range(3):
        for i, tool in enumerate(["search", "book", "book"]):
            model.observe_step(["search", "book", "book"][:i], tool, 0.0, True)
    assert model.recommend_next(["search", "book"], after_failure=True)[0].tool == "book"
    assert model.recommend_next(["search", "book"], after_failure=True) == model.recommend_next(["search", "book"])


def test_p_works_is_the_success_count_there_shrunk_to_the_tools_own_rate() -> None:
    model = SequenceModel()
    session(model, [("a", True), ("b", False), ("b", False), ("b", True)])
    [first] = model.recommend_next(["a", "b"], top_k=1, after_failure=True)
    # b after a, then b that failed: 1 call, it failed; b overall 1 of 3 worked: (1 + 1) / (3 + 2) = 0.4
    assert (first.tool, first.count, first.success_rate) == ("b", 1, 0.0)
    assert first.p_works == pytest.approx((0 + 2 * 0.4) / (1 + 2))
    [then] = model.recommend_next(["b", "b"], top_k=1, after_failure=True)  # the second retry worked
    assert (then.tool, then.count) == ("b", 1) and then.p_works == pytest.approx((1 + 2 * 0.4) / (1 + 2))


def test_a_revision_after_a_failure_reaches_the_failed_context() -> None:
    model = SequenceModel()
    session(model, [("a", True), ("b", False), ("b", True)])
    model.revise(["a", "b"], "b", -8.0, -1, after_failure=True)  # the user rated the retry 1
    [retry] = model.recommend_next(["a", "b"], top_k=1, after_failure=True)
    assert (retry.tool, retry.success_rate, retry.mean_reward) == ("b", 0.0, 2.0)


def test_a_wrong_pick_the_agent_corrected_is_no_successful_sequence() -> None:
    """diff failed and the agent switched to log: "diff → log" is a correction, not a sequence that worked
    (get_successful_sequences); after a diff that worked, log counts as following it."""
    model = SequenceModel(min_count=1)
    for _ in range(3):
        session(model, [("diff", False), ("log", True)])
    assert model.top_sequences() == []
    session(model, [("start", True), ("diff", True), ("log", True)])
    sequences = {(*r.prefix, r.tool): (r.count, r.success_rate) for r in model.top_sequences()}
    assert sequences == {("diff", "log"): (1, 1.0), ("start", "diff"): (1, 1.0), ("start", "diff", "log"): (1, 1.0)}


def test_a_sequence_whose_last_step_never_worked_is_no_successful_sequence() -> None:
    """status worked and the status after it failed each time: "status → status (2×, 0% success)" was listed by
    get_successful_sequences. One whose last step worked at least once stays, with its rate."""
    model = SequenceModel(min_count=1)
    for _ in range(2):
        session(model, [("status", True), ("status", False)])
    assert model.top_sequences() == []
    session(model, [("status", True), ("status", True)])
    [listed] = model.top_sequences()
    assert ((*listed.prefix, listed.tool), listed.count) == (("status", "status"), 3)
    assert listed.success_rate == pytest.approx(1 / 3)


def test_the_failed_contexts_survive_a_state_round_trip() -> None:
    model = booking_sessions()
    clone = SequenceModel()
    clone.load_state(unpack(pack(model.state_dict())))
    for after_failure in (True, False):
        assert clone.recommend_next(["search", "book"], after_failure=after_failure) == model.recommend_next(
            ["search", "book"], after_failure=after_failure
        )
    assert clone.table == model.table
    assert all("\x00" not in "".join(r.prefix) + r.tool for r in clone.top_sequences())


def test_a_replays_batches_count_the_failed_contexts_as_steps_do() -> None:
    rng = np.random.default_rng(3)
    tools = [f"t{k}" for k in range(8)]
    rows: list[tuple[str | None, str, tuple[str, ...], float, bool, bool]] = []
    history: list[tuple[str, bool]] = []
    for k in range(3_000):
        if k % 7 == 0:
            history = []
        tool = history[-1][0] if history and not history[-1][1] else tools[int(rng.integers(len(tools)))]
        ok = bool(rng.random() < 0.7)
        before = history[-1][0] if history else None
        after_failure = bool(history) and not history[-1][1]
        rows.append((before, tool, tuple(t for t, _ in history[-2:]), float(rng.normal(5, 3)), ok, after_failure))
        history.append((tool, ok))
    one, other = SequenceModel(), SequenceModel()
    for _, tool, prefix, reward, ok, after_failure in rows:
        one.observe_step(prefix, tool, reward, ok, after_failure=after_failure)
    for start, end in ((0, 1_000), (1_000, 3_000)):
        part = rows[start:end]
        other.observe_batch(
            [r[0] for r in part],
            [r[1] for r in part],
            [r[2] for r in part],
            np.array([r[3] for r in part]),
            np.array([r[4] for r in part]),
            np.array([r[5] for r in part]),
        )
        other.load_state(other.state_dict())
    assert other.table == one.table and len(other) == len(one)
    assert other.recommend_next(["t1", "t2"], after_failure=True) == one.recommend_next(
        ["t1", "t2"], after_failure=True
    )
    assert one.recommend_next(["t1", "t2"], top_k=1, after_failure=True)[0].tool == "t2"
