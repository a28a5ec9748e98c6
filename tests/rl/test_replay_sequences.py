from __future__ import annotations

import numpy as np
import pytest

from tests.rl.test_batch import ngrams
from toolwise.rl import PrioritizedReplay, SequenceModel, SumTree, ToolDoc, Transition
from toolwise.rl.features import Features
from toolwise.rl.toolindex import ToolIndex


def observe(model: SequenceModel, tools: list[str], rewards: list[float], successes: list[bool]) -> None:
    """A whole session's steps, one after the other, as the learner observes them (the first one too:
    it counts as a unigram)."""
    for i in range(len(tools)):
        model.observe_step(tools[:i], tools[i], rewards[i], successes[i])


def sessions_of_twelve_tools(seed: int) -> tuple[list[str], SequenceModel]:
    """A model that learned 60 random sessions of 6 calls over 12 tools (80% of them worked)."""
    rng = np.random.default_rng(seed)
    tools = [f"t{i}" for i in range(12)]
    model = SequenceModel()
    for _ in range(60):
        session = [tools[i] for i in rng.integers(len(tools), size=6)]
        observe(model, session, rng.random(6).tolist(), (rng.random(6) < 0.8).tolist())
    return tools, model


def test_sum_tree_keeps_totals_and_finds_leaves_by_mass() -> None:
    tree = SumTree(5)
    for i, v in enumerate([1.0, 2.0, 3.0, 4.0, 0.0]):
        tree.set(i, v)
    assert tree.total == 10.0
    assert [tree.find(m) for m in (0.0, 0.99, 1.0, 2.99, 3.0, 5.99, 6.0, 9.99)] == [0, 0, 1, 1, 2, 2, 3, 3]
    tree.set(3, 0.5)
    assert tree.total == 6.5


def test_sampling_frequencies_follow_priorities_to_the_alpha() -> None:
    replay = PrioritizedReplay(capacity=4, alpha=0.6)
    for i in range(4):
        replay.add(Transition(i, i, 0.0, -1))
    replay.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]) - replay.epsilon)
    rng = np.random.default_rng(42)
    counts = np.zeros(4)
    for _ in range(2_000):
        counts += np.bincount(replay.sample(32, rng).slots, minlength=4)
    expected = np.array([1, 2, 3, 4]) ** 0.6 / (np.array([1, 2, 3, 4]) ** 0.6).sum()
    assert counts / counts.sum() == pytest.approx(expected, abs=0.01)


def test_importance_weights_correct_for_the_sampling_bias() -> None:
    replay = PrioritizedReplay(capacity=2, alpha=1.0, beta=0.5, beta_steps=10**9)
    replay.add(Transition(0, 0, 0.0, -1))
    replay.add(Transition(1, 1, 0.0, -1))
    replay.update_priorities(np.array([0, 1]), np.array([1.0, 3.0]) - replay.epsilon)
    batch = replay.sample(64, np.random.default_rng(0))
    probs = {0: 0.25, 1: 0.75}
    raw = {s: (2 * p) ** -0.5 for s, p in probs.items()}
    for slot, weight in zip(batch.slots, batch.weights, strict=True):
        assert weight == pytest.approx(raw[int(slot)] / max(raw[int(s)] for s in batch.slots))


def test_new_transitions_get_the_maximum_priority_and_beta_anneals() -> None:
    replay = PrioritizedReplay(capacity=8, alpha=1.0, beta=0.4, beta_steps=100)
    replay.add(Transition(0, 0, 0.0, -1))
    replay.update_priorities(np.array([0]), np.array([5.0]))
    replay.add(Transition(1, 1, 0.0, -1))
    assert replay.tree.leaf(1) == pytest.approx(replay.max_priority)
    replay.sample(50, np.random.default_rng(0))
    assert replay.beta == pytest.approx(0.7)
    replay.sample(100, np.random.default_rng(0))
    assert replay.beta == 1.0


def test_next_tools_are_witten_bell_estimates_that_back_off_to_shorter_prefixes() -> None:
    model = SequenceModel()
    for _ in range(2):
        observe(model, ["git_status", "git_diff", "git_commit"], [1, 1, 1], [True, True, True])
    for _ in range(3):
        observe(model, ["git_log", "git_diff", "git_show"], [1, 1, 0], [True, True, False])
    observe(model, ["git_status", "git_diff", "git_add"], [1, 1, 1], [True, True, True])

    worked = model.next_distribution(["git_status", "git_diff"])  # the steps that worked only
    # P(commit | diff) = 2/5 · P(commit) + 2/5, P(commit) = 2/15; P(commit | status, diff) = 2/5 · that + 2/5
    assert worked["git_commit"] == pytest.approx(2 / 5 * (2 / 5 * 2 / 15 + 2 / 5) + 2 / 5)
    assert "git_show" not in worked, "every call of it failed"
    assert sum(worked.values()) == pytest.approx(1.0)

    longest = model.recommend_next(["git_status", "git_diff"])  # the agent's next call: every call counts
    assert [r.tool for r in longest][:3] == ["git_commit", "git_add", "git_show"]
    # P(commit | diff) = 3/9 · P(commit) + 2/9, P(commit) = 2/18; P(commit | status, diff) = 2/5 · that + 2/5
    assert longest[0].score == longest[0].p_agent == pytest.approx(2 / 5 * (3 / 9 * 2 / 18 + 2 / 9) + 2 / 5)
    assert longest[0].prefix == ("git_status", "git_diff")
    assert longest[0].reason == "follows git_status → git_diff → git_commit (2×, 100% success)"
    assert longest[1].prefix == ("git_status", "git_diff"), "seen once after this prefix: it still answers"
    show = longest[2]
    assert (show.prefix, show.success_rate) == (("git_diff",), 0.0)
    assert show.p_works == pytest.approx((0 + 2 * 1 / 5) / (3 + 2)), "no success in 3: shrunk to its own 1/5"

    [unseen] = model.recommend_next(["git_add"], top_k=1)  # never followed by anything: the unigrams answer
    assert (unseen.tool, unseen.prefix) == ("git_diff", ())
    assert unseen.reason == "often called (6×, 100% success), never yet after these tools"
    assert [r.tool for r in model.recommend_next([], top_k=1)] == ["git_diff"]
    assert [r.tool for r in model.recommend_next(["git_diff"], candidates=["git_add"])] == ["git_add"]


def test_replay_and_sequence_state_round_trip() -> None:
    replay = PrioritizedReplay(capacity=4)
    for i in range(6):
        replay.add(Transition(i, i % 2, 0.1 * i, -1))
    copy = PrioritizedReplay()
    copy.load_state(replay.state_dict())
    a, b = replay.sample(8, np.random.default_rng(1)), copy.sample(8, np.random.default_rng(1))
    assert a.slots.tolist() == b.slots.tolist() and a.transitions == b.transitions

    model = SequenceModel()
    observe(model, ["a", "b", "c"], [1, 2, 3], [True, True, False])
    clone = SequenceModel()
    clone.load_state(model.state_dict())
    assert clone.table == model.table


def test_a_revised_step_stops_counting_as_a_successful_sequence() -> None:
    model = SequenceModel()
    for _ in range(3):
        model.observe_step(["git_status"], "git_log", 10.0, True)
    assert model.follow_scores("git_status") == {"git_log": pytest.approx(0.75)}
    for _ in range(3):
        model.observe_step([], "x", 0.0, True)  # no history: nothing to count
        model.revise(["git_status"], "git_log", -4.0, -1)
    assert model.follow_scores("git_status") == {"git_log": 0.0}
    [stats] = model.table[("git_status",)].values()
    assert stats.mean_reward == pytest.approx(6.0)


def test_sequence_state_round_trips_and_the_row_format_still_loads() -> None:
    model = SequenceModel()
    observe(model, ["a", "b", "c", "b", "c"], [0, 1, 2, 3, 4], [True, True, False, True, True])
    clone = SequenceModel()
    clone.load_state(model.state_dict())
    assert clone.table == model.table
    rows = [[list(p), t, s.count, s.reward_sum, s.successes] for p, n in model.table.items() for t, s in n.items()]
    old = SequenceModel()
    old.load_state({"schema": 1, "max_n": 3, "min_count": 2, "ngrams": rows})  # snapshots taken before
    assert old.table == model.table


def test_a_state_without_unigrams_rebuilds_them_from_its_bigrams() -> None:
    model = SequenceModel()
    observe(model, ["a", "b", "c", "b", "c"], [0, 1, 2, 3, 4], [True, True, False, True, True])
    clone = SequenceModel()
    clone.load_state(model.state_dict())
    assert clone.unigrams == model.unigrams and clone.next_distribution(["b"]) == model.next_distribution(["b"])
    old_state = {k: v for k, v in model.state_dict().items() if not k.startswith("unigram_")} | {"schema": 2}
    old = SequenceModel()
    old.load_state(old_state)  # snapshots taken before unigrams were kept: the first step "a" is not known
    assert old.unigrams == {t: s for t, s in model.unigrams.items() if t != "a"}
    assert old.recommend_next(["c"], top_k=1)[0].tool == "b"


def test_a_loaded_state_learns_on_as_the_original_whichever_prefixes_it_touches() -> None:
    _, model = sessions_of_twelve_tools(seed=4)
    clone = SequenceModel()
    clone.load_state(model.state_dict())  # loaded as columns: a prefix is built when first used
    assert len(clone) == len(model)
    for m in (model, clone):
        m.observe_step(["t1", "t2"], "t3", 5.0, True)
        m.observe_step(["new"], "t1", 1.0, False)
        m.revise(["t4"], "t5", -2.0, -1)
    assert clone.follow_scores("t6") == model.follow_scores("t6")
    assert clone.recommend_next(["t7", "t8"]) == model.recommend_next(["t7", "t8"])
    again = SequenceModel()
    again.load_state(clone.state_dict())  # what was used and what was not, both kept
    model.compact()
    assert again.table == clone.table == model.table and len(again) == len(model)


def follow_or_none(model: SequenceModel, before: str | None, tool: str) -> float:
    """`follow_score` as a batch reports it: −1 for none."""
    score = model.follow_score(before, tool) if before is not None else None
    return -1.0 if score is None else score


def test_batches_count_as_steps_do_with_live_steps_and_a_loaded_state_between() -> None:
    """A replay's batches (columns, no object an n-gram) give the same counts, sums and follow evidence
    as one step at a time, across a loaded state, live steps and look-ups between batches, and enough
    new n-grams that the pending part is merged into the main one mid-replay."""
    rng = np.random.default_rng(7)
    tools = [f"t{k}" for k in range(40)]
    steps: list[tuple[str | None, str, tuple[str, ...], float, bool]] = []
    history: list[str] = []
    for k in range(9_000):
        if k % 6 == 0:
            history = []
        tool = tools[int(rng.integers(len(tools)))]
        before = history[-1] if history and rng.random() < 0.95 else None  # now and then no previous tool
        steps.append((before, tool, tuple(history[-2:]), float(rng.normal(5, 3)), bool(rng.random() < 0.8)))
        history.append(tool)
    one, other = SequenceModel(3, 2), SequenceModel(3, 2)
    expected, got = [], []
    for before, tool, prefix, reward, worked in steps:
        expected.append(follow_or_none(one, before, tool))
        one.observe_step(prefix, tool, reward, worked)
    chunks = [(0, 5_000, "batch"), (5_000, 5_020, "steps"), (5_020, 6_000, "batch"), (6_000, 6_010, "load")]
    chunks += [(6_010, 7_000, "batch"), (7_000, 8_000, "batch"), (8_000, 8_050, "steps"), (8_050, 9_000, "batch")]
    for start, end, how in chunks:
        part = steps[start:end]
        if how == "batch":
            follow = other.observe_batch(
                [b for b, *_ in part],
                [t for _, t, *_ in part],
                [p for _, _, p, *_ in part],
                np.array([r for *_, r, _ in part]),
                np.array([w for *_, w in part]),
            )
            got.extend(follow.tolist())
            continue
        if how == "load":
            other.load_state(other.state_dict())  # as a snapshot's load leaves it: all in columns
        for before, tool, prefix, reward, worked in part:
            got.append(follow_or_none(other, before, tool))
            other.recommend_next([tool])  # a live look-up takes a prefix out of the columns
            other.observe_step(prefix, tool, reward, worked)
    assert got == expected
    assert len(other) == len(one) > 5_000
    assert ngrams(one.state_dict()) == ngrams(other.state_dict())  # every sum the same number: added in the same order
    assert one.unigrams == other.unigrams
    assert one.recommend_next(["t1", "t2"]) == other.recommend_next(["t1", "t2"])


def test_a_loaded_state_reads_the_next_tools_as_the_original_and_the_choice_models_column_agrees() -> None:
    """Reading a prefix of a loaded snapshot (in columns, or taken into a dict by a step) gives the
    original's next-tool distribution, and the choice model's sequence feature is log(1 + N·P) of it."""
    tools, model = sessions_of_twelve_tools(seed=7)
    clone = SequenceModel()
    clone.load_state(model.state_dict())
    for m in (model, clone):
        m.observe_step(["t1", "t2"], "t3", 5.0, True)  # the clone's ("t2",) and ("t1", "t2") taken into dicts
    index = ToolIndex()
    index.set_tools([ToolDoc(t) for t in tools])
    features, arms = Features(index, clone), index.active
    for history in (["t1", "t2"], ["t2"], ["t5", "t6"], ["t7"], ["new"], []):
        expected = model.next_distribution(history)
        assert clone.next_distribution(history) == expected, history
        want = np.log1p(len(arms) * np.array([expected.get(t, 0.0) for t in tools]))
        np.testing.assert_allclose(features.sequence_column(history, arms), want, rtol=1e-12, atol=0)
    for m in (model, clone):
        m.observe_step(["t5", "t6"], "t7", 1.0, True)  # a prefix read in place still counts on
    assert clone.next_distribution(["t5", "t6"]) == model.next_distribution(["t5", "t6"])


def test_a_runs_sequence_columns_are_each_historys_column_to_the_last_bit() -> None:
    """The batch path's sequence columns (all of a run's histories at once) are the numbers the live path
    computes one history at a time: histories with no seen prefix, one, two, and tools the catalogue lacks."""
    tools, model = sessions_of_twelve_tools(seed=11)
    index = ToolIndex()
    index.set_tools([ToolDoc(t) for t in tools[:9]])  # t9..t11 were called but are not listed
    features = Features(index, model)
    arms = np.append(index.active, index.tools.intern("t10"))
    histories = [["t1", "t2"], ["t2"], [], ["t9", "t10"], ["t10"], ["new"], ["t3", "t4"], ["t11", "t0"]]
    assert {len(model.backoff(h)[1]) for h in histories} == {0, 1, 2}
    each = np.stack([features.sequence_column(h, arms) for h in histories])
    np.testing.assert_array_equal(features.sequence_columns(histories, arms), each)
    listed = index.active  # every listed tool in id order: their columns read in place
    each = np.stack([features.sequence_column(h, listed) for h in histories])
    np.testing.assert_array_equal(features.sequence_columns(histories, listed), each)


def test_a_batch_counted_without_its_look_ups_counts_the_same_n_grams() -> None:
    """A caller that does not read the follow evidence (the choice model's runs) skips the look-ups: every
    count and sum the same, the evidence all −1."""
    _, model = sessions_of_twelve_tools(seed=3)
    looked, quiet = SequenceModel(), SequenceModel()
    looked.load_state(model.state_dict())
    quiet.load_state(model.state_dict())
    batch = [("t1", "t2", ("t0", "t1")), ("t2", "t3", ("t1", "t2")), (None, "t4", ()), ("t4", "t12", ("t4",))]
    counted = []
    for m, look_up in ((looked, True), (quiet, False)):
        counted.append(
            m.observe_batch(
                [b for b, _, _ in batch],
                [t for _, t, _ in batch],
                [h for _, _, h in batch],
                np.array([1.0, 2.0, 3.0, 4.0]),
                np.array([True, False, True, True]),
                look_up=look_up,
            )
        )
    assert (counted[0] > 0).any() and (counted[1] == -1.0).all()
    assert ngrams(quiet.state_dict()) == ngrams(looked.state_dict()) and quiet.unigrams == looked.unigrams


def test_a_runs_back_off_reads_a_loaded_state_with_pending_and_taken_prefixes_as_one_history_at_a_time() -> None:
    """`backoffs` (a run's histories at once: the loaded columns' groups looked up together, the n-grams a
    batch left pending read where they lie) gives each history's `backoff`, equal to the last bit: prefixes
    only in the main part, only pending (new tools), in both, taken into a dict, and never seen."""
    _, model = sessions_of_twelve_tools(seed=5)
    clone = SequenceModel()
    clone.load_state(model.state_dict())  # all in columns
    clone.observe_step(["t1", "t2"], "t3", 5.0, True)  # ("t2",) and ("t1", "t2") taken into dicts
    batch: list[tuple[str | None, str, tuple[str, ...]]] = [
        ("t4", "t12", ("t3", "t4")),
        ("t12", "t5", ("t4", "t12")),
        ("t5", "t2", ("t12", "t5")),
    ]
    batch += [(None, "t6", ()), ("t6", "t7", ("t6",)), ("t7", "t13", ("t6", "t7"))]
    clone.observe_batch(
        [b for b, _, _ in batch],
        [t for _, t, _ in batch],
        [h for _, _, h in batch],
        np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        np.array([True, True, True, True, True, False]),
    )  # the dicts put back, the new n-grams pending
    assert clone._cold is not None and len(clone._cold.pending_keys)
    histories = [["t3", "t4"], ["t4", "t12"], ["t12"], ["t12", "t5"], ["t1", "t2"], ["t8"], ["t6", "t7"], ["new"], []]
    histories += [["t2"], ["t7"], ["t13", "t0"]]
    runs = clone.backoffs(histories)  # before the single look-ups, which merge the pending part
    assert runs == [clone.backoff(history) for history in histories]
    assert {len(levels) for _, levels in runs} == {0, 1, 2}
    clone.observe_step(["t8"], "t9", 1.0, True)  # ("t8",) taken into a dict: read there, not in the columns
    assert clone.backoffs(histories) == [clone.backoff(history) for history in histories]
