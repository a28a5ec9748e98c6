"""The semantic prior's model loads from the installed package alone: never the network."""

from __future__ import annotations

import socket
from typing import Any

import numpy as np
import pytest

from toolwise.learning.embedding import WordLlamaEmbedder, by_words, tool_document, tool_effect


class NetworkUsed(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket or name resolution fails loudly (and is recorded even if a caller swallowed it)."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise NetworkUsed(f"network used: {args!r}")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_the_embedder_loads_and_embeds_with_no_network(no_network: None) -> None:
    embedder = WordLlamaEmbedder()  # a fresh load, not the process-wide one
    vectors = embedder.embed(["what time is it in Tokyo", "current time in a timezone", "show the commit log"])
    assert vectors.shape == (3, 256)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]  # a time request is nearer the time tool


def test_a_text_with_no_known_word_embeds_to_zero() -> None:
    assert not WordLlamaEmbedder().embed([""]).any()


def test_the_tool_document_names_its_words_and_parameters() -> None:
    schema = {"properties": {"timezone": {"description": "IANA name"}, "maxCount": {"type": "integer"}}}
    document = tool_document("time__getCurrentTime", None, "Current time in a timezone", schema)
    assert document == "time get Current Time. Current time in a timezone timezone: IANA name max Count"


def test_a_tools_effect_is_read_from_its_annotations_as_the_mcp_spec_defaults_them() -> None:
    assert tool_effect(True, None) == "reads" and tool_effect(True, True) == "reads"  # destructive only if writing
    assert tool_effect(False, False) == "writes"
    assert tool_effect(False, None) == "destroys" and tool_effect(None, True) == "destroys"  # the spec's default
    assert tool_effect(None, None) == "unknown"  # no hints: nothing is assumed


def test_a_text_embeds_to_the_same_vector_alone_and_beside_a_far_longer_one() -> None:
    """A run embeds its requests in one batch, a decision its one request: the same vector either way, the
    mean of the text's own tokens (WordLlama's `embed` of it), whatever the batch's longest text."""
    embedder = WordLlamaEmbedder()
    short, long = "what time is it in Tokyo", "list the open pull requests of the repository " * 60
    together = embedder.embed([short, long, ""])
    assert together[0].tobytes() == embedder.embed([short])[0].tobytes()
    assert together[1].tobytes() == embedder.embed([long])[0].tobytes()
    assert not together[2].any()
    reference = np.asarray(embedder.model.embed([short, long], norm=True))
    np.testing.assert_allclose(together[:2], reference, rtol=0, atol=1e-6)


TEXTS = [
    "What is the weather like in Boston today?",
    "convert 250 dollars into euros",
    "hello  world",  # a run of spaces: tokenised whole
    " leading space",
    "trailing space ",
    "a <s> b",  # an added token: matched before any split
    "x</s>y z",
    "emoji 😀 and ünïcödé wörds 中文",
    "tab\tand\nnew line",
    "▁odd ▁case",
    "it's 3.14 + 2 = 5?",
    "",
    "a",
]


def test_a_text_has_the_same_token_ids_word_by_word_as_whole() -> None:
    """A decision tokenises only the words of its request not seen before (the tokenizer merges over a whole
    text, never across a word): the same ids as the whole text gives, first and again with its words kept,
    alone and in a batch, for texts split by words and those tokenised whole."""
    embedder = WordLlamaEmbedder()
    embedder.load()
    assert embedder._by_words
    whole = embedder._tokenised(TEXTS)
    assert [embedder.token_ids([t])[0] for t in TEXTS] == whole
    assert embedder.token_ids(TEXTS) == whole
    vectors = embedder.embed(TEXTS)
    embedder._words.clear()
    assert vectors.tobytes() == embedder.embed(TEXTS).tobytes()


def test_a_tokenizer_that_merges_across_words_is_not_read_word_by_word() -> None:
    normalizer = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Prepend", "prepend": "▁"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        ],
    }
    model: dict[str, Any] = {"type": "BPE", "dropout": None, "vocab": {"▁a": 0, "▁▁": 1}}
    spaced: dict[str, Any] = {"model": model, "normalizer": normalizer}
    assert by_words({**spaced, "pre_tokenizer": None})
    assert not by_words({**spaced, "model": {**model, "vocab": {"a▁b": 0}}})  # a merge across words
    assert not by_words({**spaced, "pre_tokenizer": {"type": "Metaspace"}})
    assert not by_words({**spaced, "normalizer": None})
