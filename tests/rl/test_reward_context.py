from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolwise.rl import ContextEncoder, RewardWeights, compute_reward, normalise
from toolwise.rl.context import _slot

W = RewardWeights()


@given(
    success=st.booleans(),
    latency=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    rating=st.none() | st.integers(1, 5),
    mean=st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_reward_stays_within_the_weights_bounds(
    success: bool, latency: float, rating: int | None, mean: float | None
) -> None:
    low, high = W.bounds
    reward = compute_reward(W, success=success, latency_s=latency, rating=rating, mean_latency_s=mean)
    assert low <= reward <= high
    assert 0.0 <= normalise(W, reward) <= 1.0


def test_reward_matches_the_design_card() -> None:
    assert compute_reward(W, success=True, latency_s=2.0) == pytest.approx(9.8)
    assert compute_reward(W, success=False, latency_s=1.0, rating=1) == pytest.approx(-9.1)
    # rating 5 adds 4; 0.5 s is faster than 0.8 × the 1 s running mean: +2
    assert compute_reward(W, success=True, latency_s=0.5, rating=5, mean_latency_s=1.0) == pytest.approx(15.95)
    assert W.bounds[0] < -9 and W.bounds[1] == pytest.approx(16.0)


def test_missing_rating_contributes_nothing() -> None:
    with_3 = compute_reward(W, success=True, latency_s=1.0, rating=3)
    assert compute_reward(W, success=True, latency_s=1.0) == with_3


@pytest.mark.parametrize("latency", [-0.1, math.nan, math.inf])
def test_latency_must_be_finite_and_non_negative(latency: float) -> None:
    with pytest.raises(ValueError, match="latency must be a finite number"):
        compute_reward(W, success=True, latency_s=latency)


@pytest.mark.parametrize("rating", [0, 6, True])
def test_rating_outside_one_to_five_is_refused(rating: int) -> None:
    with pytest.raises(ValueError, match="rating must be an integer from 1 to 5"):
        compute_reward(W, success=True, latency_s=0.0, rating=rating)


def test_weights_are_validated_with_the_bad_value_named() -> None:
    with pytest.raises(ValueError, match="-1"):
        RewardWeights(latency_per_second=-1)
    with pytest.raises(ValueError, match="success reward must exceed"):
        RewardWeights(success=-10)


ENCODER = ContextEncoder()


@given(query=st.text(max_size=80), previous=st.none() | st.text(max_size=20), length=st.integers(0, 1000))
def test_same_input_gives_same_hash_and_unit_vector(query: str, previous: str | None, length: int) -> None:
    a = ENCODER._encode(query, previous, length)
    b = ENCODER._encode(query, previous, length)
    assert a.hash == b.hash
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.values, b.values)
    assert np.linalg.norm(a.values) == pytest.approx(1.0)
    assert ((a.indices >= 0) & (a.indices < ENCODER.dim)).all()


# The context of ("show git diff please", previous "git__status", 7 calls) as every version so far encoded
# it: hashes and feature slots are stored (executions.context_hash, snapshots), so they must not drift.
PINNED_HASH = "1a0ad9ffb6efaac19f16701ccf34f6846b670a741cae476e5cfed1612e46d579"
PINNED_SLOTS = "[64, 98, 101, 122, 4, 180] [-1.0, -1.0, 1.0, -1.0, -1.0, -1.0]"


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
def test_context_is_the_pinned_one_in_processes_with_other_hash_seeds(hash_seed: str) -> None:
    code = (
        "from toolwise.rl import ContextEncoder; import numpy as np;"
        "c = ContextEncoder().encode('show git diff please', 'git__status', 7);"
        "print(c.hash); print(c.indices.tolist(), np.sign(c.values).tolist())"
    )
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out == f"{PINNED_HASH}\n{PINNED_SLOTS}\n"
    here = ENCODER.encode("show git diff please", "git__status", 7)
    assert here.hash == PINNED_HASH
    assert np.allclose(np.abs(here.values), 1 / math.sqrt(6))


def test_context_key_uses_domain_keywords_first_words_previous_tool_and_length_bucket() -> None:
    c = ENCODER.encode("Please show the GIT diff of main", "git__status", 7)
    assert c.keywords == ("diff", "git", "git", "diff", "main")
    assert c.length_bucket == 1
    assert ENCODER.encode("show the git diff of main", "git__status", 9).hash == c.hash  # same bucket
    assert ENCODER.encode("show the git diff of main", "git__status", 10).hash != c.hash
    assert ENCODER.encode("show the git diff of main", "git__log", 7).hash != c.hash


def test_features_sharing_a_slot_add_up_before_normalising() -> None:
    # Twelve features in eight slots: some must share one (the hashing trick), and their signs add up.
    encoder = ContextEncoder(dim=8)
    words = "alpha beta gamma delta epsilon zeta eta theta"
    context = encoder._encode(words, "srv__tool", 2)
    expected = np.zeros(8)
    for name in [*(f"w={w}" for w in words.split()), "prev=srv__tool", "len=0", "pos=2", "bias"]:
        index, sign = _slot(name, 8)
        expected[index] += sign
    expected /= np.linalg.norm(expected)
    assert len(set(context.indices.tolist())) == len(context.indices) < 12
    dense = np.zeros(8)
    np.add.at(dense, context.indices, context.values)
    assert np.allclose(dense, expected)
    assert np.allclose(context.squares, context.values**2)


def test_memoised_contexts_are_read_only() -> None:
    context = ContextEncoder().encode("git status", None, 0)
    with pytest.raises(ValueError, match="read-only"):
        context.values[0] = 1.0
