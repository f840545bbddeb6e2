"""Sentence embeddings from the user's own OpenAI-compatible server (``POST {base_url}/embeddings``).

vLLM, Ollama, llama.cpp's server, LM Studio and OpenAI itself serve this endpoint; a stronger or multilingual model
there can rank skills better than the small English model the package ships. Whatever the server answers is checked
before it is used (one vector per text, all of one size, finite numbers): a server that answers anything else is
an error the caller falls back from (see :func:`orchestrator.select.semantic.embedder_for`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np
import openai

from orchestrator.errors import ModelError, ModelErrorCode

#: Texts per request: servers cap a batch (llama.cpp's default is 512 tokens per slot, vLLM's a few thousand).
BATCH = 32
#: Characters sent per token asked for: the server's tokenizer is unknown, and a text cut a little late costs
#: nothing while one cut early loses words.
CHARS_PER_TOKEN = 8
#: No embedding model in use has more dimensions than this; a larger answer is refused, not stored.
MAX_DIMENSIONS = 8192
#: A skill's name and description are read this far by a server's model (it is the user's, and may read more than
#: the bundled one's 48 tokens); a hostile megabyte of description is never sent whole.
DEFAULT_MAX_TOKENS = 256
API_KEY_ENV = "ORCH_EMBEDDINGS_API_KEY"


class ServerEmbedder:
    """The :class:`~orchestrator.select.semantic.Embedder` of model ``model`` at ``base_url`` (ending in ``/v1``).

    The API key is ``ORCH_EMBEDDINGS_API_KEY``, else ``OPENAI_API_KEY``, else a placeholder (local servers accept
    any); it is sent to that server only and never logged. ``dimensions`` is what the server's vectors have, learnt
    from its first answer. Raises :class:`~orchestrator.errors.ModelError` when the server cannot be reached or
    answers something that is not one vector per text."""

    def __init__(self, base_url: str, model: str, *, timeout_s: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        # Names the vectors in the index cache: another server or model must never reuse them.
        self.model_id = f"server:{model}@{self.base_url}"
        key = os.environ.get(API_KEY_ENV) or os.environ.get("OPENAI_API_KEY") or "none"
        self._client = openai.OpenAI(api_key=key, base_url=self.base_url, max_retries=1, timeout=timeout_s)
        self._dimensions: int | None = None

    @property
    def dimensions(self) -> int:
        if self._dimensions is None:
            self.embed(["dimensions"])
        assert self._dimensions is not None
        return self._dimensions

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None, goal: bool = False) -> np.ndarray:
        """One unit vector per text, each cut to about ``max_tokens`` tokens (default 256); goals and skills are
        sent alike (``goal`` is for models with a goal adapter, which a server's model has not)."""
        limit = (max_tokens or DEFAULT_MAX_TOKENS) * CHARS_PER_TOKEN
        # An empty input is refused by some servers; one space stands for it.
        cut = [t[:limit] or " " for t in texts]
        rows = [self._batch(cut[start : start + BATCH]) for start in range(0, len(cut), BATCH)]
        if not rows:
            return np.zeros((0, self._dimensions or 0), dtype=np.float32)
        vectors = np.concatenate(rows)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return np.asarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)

    def _batch(self, texts: list[str]) -> np.ndarray:
        try:
            answer = self._client.embeddings.create(model=self.model, input=texts, encoding_format="float")
        except openai.APIError as e:
            failure = f"the embeddings server failed: {type(e).__name__}: {e}"
            raise self._error(failure, ModelErrorCode.UNREACHABLE) from e
        try:
            vectors = _vectors_in(answer, len(texts))
        except (AttributeError, TypeError, ValueError) as e:
            raise self._error(f"the embeddings server's answer is not a list of embeddings: {e}") from e
        sizes = {len(v) for v in vectors}
        size = sizes.pop() if len(sizes) == 1 else 0
        if not 0 < size <= MAX_DIMENSIONS or (self._dimensions is not None and size != self._dimensions):
            raise self._error(f"the embeddings server's vectors have {sorted(sizes | {size})} dimensions")
        if not all(isinstance(x, float | int) and math.isfinite(x) for v in vectors for x in v):
            raise self._error("the embeddings server's vectors hold values that are not finite numbers")
        self._dimensions = size
        return np.asarray(vectors, dtype=np.float32)

    def _error(self, message: str, code: ModelErrorCode = ModelErrorCode.EMPTY_ANSWER) -> ModelError:
        return ModelError(
            message,
            code=code,
            where="embeddings",
            next_step=f"check that {self.base_url}/embeddings serves the model {self.model!r}, or unset "
            "ORCH_SELECTION__EMBEDDINGS_URL to use the bundled model",
            model=self.model,
        )


def _vectors_in(answer: object, count: int) -> list[list[float]]:
    """The vectors of an embeddings answer in input order; ValueError unless there is one per input."""
    data = list(getattr(answer, "data", None) or [])
    by_index = {int(d.index): d.embedding for d in data}
    if len(data) != count or sorted(by_index) != list(range(count)):
        raise ValueError(f"{len(data)} vectors for {count} texts")
    vectors = [by_index[i] for i in range(count)]
    if not all(isinstance(v, list) for v in vectors):
        raise ValueError("an embedding is not a list of numbers")
    return vectors
