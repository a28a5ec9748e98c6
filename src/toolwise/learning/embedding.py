"""The text-embedding model behind the semantic prior: WordLlama's static token embeddings, offline.

WordLlama (`wordllama` on PyPI) ships its 256-d weights and tokenizer inside its wheel: an embedding
is the average of token vectors, computed on one CPU core with no model server. Its default loader
looks for the shipped tokenizer under a folder name that does not exist (`tokenizer/`, the file is in
`tokenizers/`) and then downloads it from the network; loading with the package's own folder as the
cache and downloads disabled finds both files and never touches the network (a missing file is a loud
FileNotFoundError, not a download).
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.learning.minilm import MiniLMEmbedder
from toolwise.learning.worker import Abandoned
from toolwise.rl.embedding import Embedder, name_words
from toolwise.rl.toolindex import Effect

log = logging.getLogger(__name__)

EMBEDDINGS = ("wordllama", "minilm", "none")
EMBED_CHUNK = 32  # texts embedded between two looks at a stop: one MiniLM batch
WORDS = 65_536  # words whose token ids WordLlamaEmbedder keeps (a few ids each); emptied when full
SPECIAL = ("<unk>", "<s>", "</s>")  # the tokenizer's added tokens, matched in the raw text before it is split


class WordLlamaEmbedder:
    """`Embedder` over a WordLlama model loaded from the installed package's own files, at first use or
    by `load` ahead of it (a server loads it in a worker thread while its downstreams boot: the first
    answers need not wait for its import and loading)."""

    name = "wordllama"

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self._model: Any = None
        self._tokenizer: Any = None  # the model's, without its padding (`load`)
        self._loading = threading.Lock()
        # word → its token ids, where the tokenizer never merges across words (`by_words`, set by `load`). A
        # plain dict, read and written with single (atomic) operations: a catalogue may embed on a worker
        # thread while a decision embeds its query.
        self._words: dict[str, list[int]] = {}
        self._by_words = False
        self._starts: frozenset[int] = frozenset()  # the tokens that open a word ("▁…"): where words' ids part

    def load(self) -> Any:
        """The model, loaded once (thread-safe)."""
        with self._loading:
            if self._model is None:
                root_logger = logging.getLogger()
                handlers, level = list(root_logger.handlers), root_logger.level
                import wordllama  # its import calls logging.basicConfig(INFO): undone below

                root_logger.handlers[:], root_logger.level = handlers, level
                logging.getLogger("wordllama").setLevel(logging.WARNING)
                package = Path(wordllama.__file__).parent
                model = wordllama.WordLlama.load(cache_dir=package, disable_download=True, dim=self.dim)
                # A copy that pads nothing: the model's pads every text of a batch to its longest (its own
                # `embed` stacks them), which here only made ids, masks and "[PAD]" tokens to cut off again
                # (a run's batch of queries with one page-long request among them). The same ids.
                tokenizer = type(model.tokenizer).from_str(model.tokenizer.to_str())
                tokenizer.no_padding()
                spec = json.loads(tokenizer.to_str())
                self._by_words = by_words(spec)
                vocab = spec["model"].get("vocab") or {}
                self._starts = frozenset(i for token, i in vocab.items() if token.startswith("\u2581"))
                self._tokenizer, self._model = tokenizer, model
        return self._model

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer without padding (loads the model at first use)."""
        tokenizer = self._tokenizer
        if tokenizer is None:
            self.load()
            tokenizer = self._tokenizer
        return tokenizer

    @property
    def model(self) -> Any:
        model = self._model
        return model if model is not None else self.load()

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The mean of each text's token vectors, unit length (what `WordLlamaInference.embed` computes,
        without its batch padding: a quarter of the time for the one query a decision embeds)."""
        table = self.model.embedding
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        for row, ids in enumerate(self.token_ids(texts)):
            if ids:  # the mean, as `mean` computes it (float32 sum, divided), without its wrapper
                vector = table.take(ids, 0).sum(axis=0) / np.float32(len(ids))
                norm = float(np.sqrt(vector @ vector))
                if norm > 0:
                    out[row] = vector / norm
        return out

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids (not padded). The tokenizer (SentencePiece's BPE: spaces made "▁", no
        pre-tokenizer) merges over a whole text as one word, a new request's every pair anew; where no merge
        crosses a "▁" (`by_words`), a text of single-spaced words has its words' ids one after the other, so
        a word's ids are kept and only words not seen before are tokenised: the same ids."""
        if not self._by_words:
            return self._tokenised(list(texts))
        known, split = self._words, [_words_of(text) for text in texts]
        ids_of: dict[str, list[int] | None] = {w: known.get(w) for words in split if words is not None for w in words}
        missing = [w for w, ids in ids_of.items() if ids is None]
        found = dict(zip(missing, self._each_word(missing), strict=True))
        ids_of.update(found)
        if len(known) + len(found) > WORDS:
            known.clear()
        known.update(found)
        whole = iter(self._tokenised([text for text, words in zip(texts, split, strict=True) if words is None]))
        out: list[list[int]] = []
        for words in split:
            if words is None:
                out.append(next(whole))
            else:
                out.append([i for w in words for i in ids_of[w] or ()])
        return out

    def _each_word(self, words: list[str]) -> list[list[int]]:
        """Each word's ids, tokenised as one text (a batch of several would be split over the tokenizer's
        threads for a few µs of work each), parted where a token opens a word."""
        if not words:
            return []
        parts: list[list[int]] = []
        for i in self._tokenised([" ".join(words)])[0]:
            if i in self._starts or not parts:
                parts.append([])
            parts[-1].append(i)
        if len(parts) != len(words):
            raise RuntimeError(f"{len(words)} words gave {len(parts)} parts: the tokenizer merges across words")
        return parts

    def _tokenised(self, texts: list[str]) -> list[list[int]]:
        """The tokenizer's ids of each text, whole."""
        if not texts:
            return []
        tokenizer = self.tokenizer
        # `encode_batch_fast` (where the tokenizers package has it) skips the offsets, which are not read: a
        # decision's one query costs a third less CPU than `encode` (its ids are the same), and `encode_batch`
        # of one twice as much.
        fast = getattr(tokenizer, "encode_batch_fast", None)
        if fast is not None:
            encodings = fast(texts, add_special_tokens=False)
        elif len(texts) == 1:
            encodings = [tokenizer.encode(texts[0], add_special_tokens=False)]
        else:
            encodings = tokenizer.encode_batch(texts, add_special_tokens=False)
        return [list(encoding.ids) for encoding in encodings]


def _words_of(text: str) -> list[str] | None:
    """`text`'s words, where its ids are theirs one after the other: words separated by single spaces, none
    holding an added token ("<s>": matched before the split) nor a "▁" of its own; else None (tokenised whole)."""
    if not text or "  " in text or text[0] == " " or text[-1] == " " or "\u2581" in text:
        return None
    if "<" in text and any(special in text for special in SPECIAL):
        return None
    return text.split(" ")


def by_words(tokenizer: dict[str, Any]) -> bool:
    """Whether a tokenizer (its JSON) tokenises a text of single-spaced words as its words one by one: a
    BPE that turns each space into a "▁" and prepends one (no pre-tokenizer: it merges over the whole
    text), none of whose tokens holds a "▁" after another character (so no merge crosses the start of a
    word; runs of "▁" arise from runs of spaces, which `_words_of` leaves whole), without dropout."""
    model = tokenizer.get("model") or {}
    normalizer = tokenizer.get("normalizer") or {}
    expected = [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
    ]
    if model.get("type") != "BPE" or model.get("dropout") is not None or tokenizer.get("pre_tokenizer") is not None:
        return False
    if normalizer.get("type") != "Sequence" or normalizer.get("normalizers") != expected:
        return False
    vocab = model.get("vocab") or {}
    return not any("\u2581" in token.lstrip("\u2581") for token in vocab)


def embed_until_stopped(embedder: Embedder, texts: Sequence[str], stop: threading.Event) -> NDArray[np.float32]:
    """`embedder.embed(texts)` `EMBED_CHUNK` texts at a time, raising `Abandoned` once `stop` is set between
    two chunks: an embedding a shutdown abandoned (a large catalogue, MiniLM: seconds) stops within a chunk
    instead of keeping a core until the process exits. Each text's vector is its own: the same numbers
    (WordLlama), or the same up to float rounding (MiniLM, whose batches are padded differently). Chunks
    take texts of similar length together, as MiniLM's batches do (a batch is padded to its longest)."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: NDArray[np.float32] | None = None
    for start in range(0, len(order), EMBED_CHUNK):
        if stop.is_set():
            raise Abandoned(f"stopped after {start:,} of {len(texts):,} texts")
        rows = order[start : start + EMBED_CHUNK]
        vectors = embedder.embed([texts[i] for i in rows])
        if out is None:
            out = np.zeros((len(texts), vectors.shape[1]), dtype=np.float32)
        out[rows] = vectors
    return out if out is not None else embedder.embed(texts)


@functools.cache
def load_embedder(kind: str) -> WordLlamaEmbedder | MiniLMEmbedder | None:
    """The configured embedder (`none`: the prior stays lexical); loaded once per process (immutable)."""
    if kind == "none":
        return None
    if kind == "wordllama":
        return WordLlamaEmbedder()
    if kind == "minilm":
        return MiniLMEmbedder()
    raise ValueError(f"embedding must be one of {list(EMBEDDINGS)}, got {kind!r}")


def tool_document(name: str, title: str | None, description: str | None, input_schema: dict[str, Any] | None) -> str:
    """What the prior embeds for a tool: its name as words, title, description, and each parameter's
    name and description (parameters often say what a one-line description leaves out)."""
    parts = [f"{name_words(name)}.", title or "", description or ""]
    properties = (input_schema or {}).get("properties") or {}
    if isinstance(properties, dict):
        for key, spec in properties.items():
            about = spec.get("description", "") if isinstance(spec, dict) else ""
            parts.append(f"{name_words(str(key))}: {about}" if about else name_words(str(key)))
    return " ".join(p for p in parts if p)


def tool_effect(read_only: bool | None, destructive: bool | None) -> Effect:
    """What a call of a tool does, from its annotations' `readOnlyHint` and `destructiveHint` as the MCP
    spec reads them: destructive unless said otherwise once it is not read-only; unknown without hints."""
    if read_only:
        return "reads"
    if read_only is None and destructive is None:
        return "unknown"
    return "writes" if destructive is False else "destroys"
