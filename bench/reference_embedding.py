"""The fixed embedding bench/outcomes.py builds its imperfect agent's world from (which requests it is confused
on, and with which tools): WordLlama's 256-d mean of a whole tool document's token vectors, the document being
the tool's name as words, its description and its parameters' names and descriptions, as toolwise's prior
embedded a tool up to 2026-11-27 (b4d7f43). Computed here, not through toolwise's prior
(learning/embedding.py `tool_document` and `WordLlamaEmbedder.embed`): when the world moved with the embedding
under test, a change of the prior changed which requests the agent confuses, and issue 34's target on its
confusions could not judge it (docs/benchmarks.md, "Correcting an imperfect agent"). Only the model's files are
loaded through toolwise (`WordLlamaEmbedder.load`: offline, from the installed package).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from toolwise.learning.embedding import WordLlamaEmbedder

DIM = 256
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEPARATORS = re.compile(r"[_.\-/:]+")


def words(name: str) -> str:
    """A tool or parameter name as words: `git__log_file`, `getWeather` → git log file, get weather."""
    return " ".join(_SEPARATORS.sub(" ", _CAMEL.sub(r"\1 \2", name)).split())


def document(tool: Mapping[str, Any]) -> str:
    """A data set's tool (bench/data/*/tools.jsonl) as one text: name, description, each parameter."""
    parts = [f"{words(tool['name'])}.", tool.get("description") or ""]
    properties = (tool.get("parameters") or {}).get("properties") or {}
    if isinstance(properties, dict):
        for key, spec in properties.items():
            about = spec.get("description", "") if isinstance(spec, dict) else ""
            parts.append(f"{words(str(key))}: {about}" if about else words(str(key)))
    return " ".join(p for p in parts if p)


class ReferenceEmbedding:
    """Texts as unit-length means of WordLlama's token vectors (float32 sums, as the model's own `embed`),
    returned as float64."""

    def __init__(self) -> None:
        model = WordLlamaEmbedder(dim=DIM).load()
        self.table, self.tokenizer = model.embedding, model.tokenizer

    def embed(self, texts: Sequence[str]) -> NDArray[np.float64]:
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            ids = encoding.ids[: sum(encoding.attention_mask)]  # a batch is padded on the right
            if ids:
                vector = self.table.take(ids, 0).sum(axis=0) / np.float32(len(ids))
                norm = float(np.sqrt(vector @ vector))
                if norm > 0:
                    out[row] = vector / norm
        return out.astype(np.float64)

    def tools(self, tools: Sequence[Mapping[str, Any]]) -> NDArray[np.float64]:
        return self.embed([document(t) for t in tools])
