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
        table, tokenizer = self.model.embedding, self.tokenizer
        out = np.zeros((len(texts), table.shape[1]), dtype=np.float32)
        # `encode_batch_fast` (where the tokenizers package has it) skips the offsets, which are not read: a
        # decision's one query costs a third less CPU than `encode` (its ids are the same), and `encode_batch`
        # of one twice as much.
        fast = getattr(tokenizer, "encode_batch_fast", None)
        if fast is not None:
            encodings = fast(list(texts), add_special_tokens=False)
        elif len(texts) == 1:
            encodings = [tokenizer.encode(texts[0], add_special_tokens=False)]
        else:
            encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            ids = encoding.ids  # not padded: the text's own
            if ids:  # the mean, as `mean` computes it (float32 sum, divided), without its wrapper
                vector = table.take(ids, 0).sum(axis=0) / np.float32(len(ids))
                norm = float(np.sqrt(vector @ vector))
                if norm > 0:
                    out[row] = vector / norm
        return out


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
