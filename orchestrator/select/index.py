"""The skill index: what retrieval knows about each skill, built once per library state.

Each skill's index entry (its terms per field, and its embedding when the semantic ranker is on) is derived from the
SKILL.md bytes only, so it is cached under ``ORCH_CACHE_DIR/select/`` by the sha256 of those bytes: a library where
one skill changed re-derives that one entry. The BM25 matrices are rebuilt from the cached terms (milliseconds for a
thousand skills).
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from orchestrator.config import SelectionSettings
from orchestrator.errors import ModelError
from orchestrator.logs import get_logger
from orchestrator.select.gloss import reading_tag
from orchestrator.select.lexical import FIELD_WEIGHTS, LexicalRanker, bilingual_terms, tokenize
from orchestrator.select.semantic import (
    EMBED_RECIPE,
    SEMANTIC_WEIGHT,
    BertEmbedder,
    Embedder,
    SemanticRanker,
    embed_text,
    fuse,
    server_embedder,
    shipped_embedder,
)
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.parsed import SkillSummary

_log = get_logger("orchestrator.select")

#: Bumped whenever tokenisation, the entry format or the reading of a SKILL.md changes (entries are keyed by the
#: file's bytes, so a new reading of the same bytes needs a new version), so old cache entries are ignored.
INDEX_VERSION = "9"
#: How much of a body is indexed: its first part says what the skill does; the rest is mostly procedure.
BODY_MAX_CHARS = 20_000


class SkillDoc(BaseModel):
    """What the index reads of one skill."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    description: str
    body: str
    sha256: str
    disable_model_invocation: bool = False


class Hit(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    score: float


class IndexStats(BaseModel):
    skills: int = 0
    reused: int = 0
    built: int = 0
    embedded: int = 0
    index_ms: int = 0


def skill_docs(library: SkillLibrary, summaries: Sequence[SkillSummary]) -> list[SkillDoc]:
    """Index documents of the given (L1-usable) skills."""
    docs = []
    for s in summaries:
        parsed, sha = library.parsed(s.id)
        docs.append(
            SkillDoc(
                id=s.id,
                name=s.name or "",
                description=s.description or "",
                body=parsed.body[:BODY_MAX_CHARS],
                sha256=sha,
                disable_model_invocation=s.disable_model_invocation,
            )
        )
    return docs


def _name_text(doc: SkillDoc) -> str:
    # The id's folder names often say more than the name ("document-skills/pptx").
    return f"{doc.name} {doc.id}".replace("-", " ").replace("_", " ").replace("/", " ")


FIELDS = ("name", "description", "body")


def _terms(doc: SkillDoc) -> dict[str, list[str]]:
    return {
        "name": tokenize(_name_text(doc)),
        "description": bilingual_terms(doc.description),
        # A body keeps the dictionary's words alone: translating it would cost a cold index about 30 ms of CPU per
        # Portuguese, French or Italian skill (1,000 characters through two pairs), for words the body's own
        # glosses mostly give already.
        "body": bilingual_terms(doc.body, translate=False),
    }


def _shared(terms: dict[str, list[str]]) -> dict[str, list[str]]:
    """The same terms, each word one shared string object: a thousand bodies repeat a few words millions of times,
    and separate copies of them held most of a cold build's memory."""
    return {name: [sys.intern(t) for t in words] for name, words in terms.items()}


class Entry(BaseModel):
    """One skill's cached index entry: its terms per field and, once embedded, its vector."""

    terms: dict[str, list[str]]
    vector_model: str = ""
    vector: str = ""
    """Base64 of the float16 vector; empty until the skill was embedded with ``vector_model``."""

    def vector_for(self, model: str) -> np.ndarray | None:
        if self.vector_model != model or not self.vector:
            return None
        try:
            values = np.frombuffer(base64.b64decode(self.vector, validate=True), dtype=np.float16)
        except ValueError:
            return None
        return values.astype(np.float32) if values.size else None

    def with_vector(self, model: str, vector: np.ndarray) -> Entry:
        data = base64.b64encode(vector.astype(np.float16).tobytes()).decode("ascii")
        return self.model_copy(update={"vector_model": model, "vector": data})


class EntryCache:
    """Per-skill index entries on disk, keyed by content: ``<dir>/<sha[:2]>/<sha>-<id and name digest>.json``."""

    def __init__(self, directory: Path | None) -> None:
        self.dir = directory / "select" / f"v{INDEX_VERSION}{reading_tag()}" if directory is not None else None

    def _path(self, doc: SkillDoc) -> Path | None:
        if self.dir is None or not doc.sha256:
            return None
        # The id and the name are part of the key: the name field holds both, so a moved skill gets new terms, and so
        # does a root skill ('.') without a name, which is read with the root folder's name.
        key = f"{doc.id}\0{doc.name}".encode("utf-8", "surrogatepass")
        id_digest = hashlib.sha256(key).hexdigest()[:16]
        return self.dir / doc.sha256[:2] / f"{doc.sha256}-{id_digest}.json"

    def get(self, doc: SkillDoc) -> Entry | None:
        path = self._path(doc)
        if path is None:
            return None
        try:
            entry = Entry.model_validate_json(path.read_bytes())
        except (OSError, ValueError):
            return None
        if set(entry.terms) != set(FIELDS):
            return None
        return entry.model_copy(update={"terms": _shared(entry.terms)})

    def put(self, doc: SkillDoc, entry: Entry) -> None:
        path = self._path(doc)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(entry.model_dump_json(), encoding="utf-8")
            tmp.replace(path)
        except OSError as e:  # a read-only cache only costs time
            _log.warning("select.cache_write_failed", path=str(path), error=str(e))


class SkillIndex:
    """Ranks skills for a query. Build with :meth:`build`; ``search`` never sees skills it was not built with."""

    def __init__(
        self,
        docs: Sequence[SkillDoc],
        fields: dict[str, list[list[str]]],
        stats: IndexStats,
        semantic: SemanticRanker | None = None,
    ) -> None:
        self.docs = list(docs)
        self.by_id = {d.id: d for d in self.docs}
        self.stats = stats
        self._lexical = LexicalRanker(fields, FIELD_WEIGHTS)
        self._semantic = semantic

    @classmethod
    def build(
        cls,
        docs: Sequence[SkillDoc],
        cache_dir: Path | None = None,
        *,
        embedder: Embedder | None = None,
        semantic_weight: float = SEMANTIC_WEIGHT,
    ) -> SkillIndex:
        """The index of ``docs``: terms (and vectors, with ``embedder``) from the cache, the rest derived and
        cached; the skills that need a vector are embedded in one pass."""
        started = time.perf_counter()
        cache = EntryCache(cache_dir)
        entries: list[Entry] = []
        stats = IndexStats(skills=len(docs))
        for doc in docs:
            entry = cache.get(doc)
            if entry is None:
                entry = Entry(terms=_shared(_terms(doc)))
                stats.built += 1
                if embedder is None:
                    cache.put(doc, entry)
            else:
                stats.reused += 1
            entries.append(entry)
        semantic = None
        if embedder is not None:
            vectors = _vectors(docs, entries, embedder, cache, stats)
            semantic = SemanticRanker(vectors, embedder, weight=semantic_weight)
        fields = {name: [e.terms[name] for e in entries] for name in FIELDS}
        index = cls(docs, fields, stats, semantic)
        stats.index_ms = int((time.perf_counter() - started) * 1000)
        _log.debug("select.indexed", **stats.model_dump())
        return index

    @classmethod
    def for_library(
        cls,
        library: SkillLibrary,
        summaries: Sequence[SkillSummary],
        cache_dir: Path | None,
        settings: SelectionSettings,
    ) -> SkillIndex:
        """The index of ``summaries`` as ``settings`` (:class:`~orchestrator.config.SelectionSettings`) ask:
        fused with the shipped sentence embedder when ``semantic`` is on and its package is installed."""
        docs = skill_docs(library, summaries)
        if settings.semantic and (server := server_embedder(settings)) is not None:
            try:
                return cls.build(docs, cache_dir, embedder=server, semantic_weight=settings.semantic_weight)
            except ModelError as e:
                _log.warning(
                    "select.embeddings_failed",
                    model=server.model_id,
                    error=str(e),
                    for_="skills",
                    reason="the embeddings server failed; skills are ranked with the bundled model",
                )
        embedder = shipped_embedder(settings.embed_max_tokens, settings.goal_adapter) if settings.semantic else None
        return cls.build(docs, cache_dir, embedder=embedder, semantic_weight=settings.semantic_weight)

    @property
    def semantic(self) -> bool:
        """Whether similarity of meaning is part of the ranking."""
        return self._semantic is not None

    @property
    def goal_adapter(self) -> bool:
        """Whether goals are read with the shipped goal adapter (:class:`~orchestrator.select.semantic.GoalAdapter`)."""
        embedder = self._semantic.embedder if self._semantic is not None else None
        return isinstance(embedder, BertEmbedder) and embedder.goal_adapter_in_use

    @property
    def vectors(self) -> np.ndarray | None:
        """Each skill's unit vector (rows in ``docs`` order) when meaning is part of the ranking."""
        return self._semantic.vectors if self._semantic is not None else None

    def scores(self, query: str) -> np.ndarray:
        lexical = self._lexical.scores(query)
        if self._semantic is None:
            return lexical
        return fuse(lexical, self._semantic.similarities(query), self._semantic.weight)

    def search(self, query: str, k: int = 20, *, exclude: Sequence[str] = (), also: Sequence[str] = ()) -> list[Hit]:
        """The ``k`` best skills for ``query`` (score > 0 only), best first; ties keep id order. ``also``: more
        readings of the same request (the goal restated by the model), whose scores are added to the query's. A
        skill that says what a better-ranked one says (a fork, a copy: :func:`twins_last`) comes after the others
        of the first ``2 k``."""
        if not self.docs:
            return []
        scores = self.scores(query)
        for reading in also:
            if reading.strip():
                scores = scores + self.scores(reading)
        skip = set(exclude)
        candidates: list[int] = []
        for i in np.argsort(-scores, kind="stable"):
            if scores[i] <= 0 or len(candidates) >= 2 * k:
                break
            if self.docs[i].id not in skip:
                candidates.append(int(i))
        if self.vectors is not None:
            candidates = twins_last(candidates, self.vectors)
        return [Hit(id=self.docs[i].id, score=round(float(scores[i]), 4)) for i in candidates[:k]]


#: Cosine similarity of two skills' vectors above which the lower-ranked one is a twin of the other (forks and copies
#: of one skill under other names: "cloning-project" and "cloning-project-2").
TWIN_SIMILARITY = 0.97


def twins_last(ranked: list[int], vectors: np.ndarray) -> list[int]:
    """``ranked`` (rows of ``vectors``, best first) with each skill whose vector is a twin of a better-ranked kept
    one moved after all the others, in its order: a shortlist of twenty is not spent on copies of one skill."""
    kept: list[int] = []
    twins: list[int] = []
    for i in ranked:
        if kept and float(np.max(vectors[kept] @ vectors[i])) >= TWIN_SIMILARITY:
            twins.append(i)
        else:
            kept.append(i)
    return kept + twins


def _vectors(
    docs: Sequence[SkillDoc], entries: list[Entry], embedder: Embedder, cache: EntryCache, stats: IndexStats
) -> np.ndarray:
    """One row per doc: cached vectors reused, the missing ones embedded together and written back."""
    model = f"{embedder.model_id}/recipe-{EMBED_RECIPE}"
    rows: list[np.ndarray | None] = [e.vector_for(model) for e in entries]
    missing = [i for i, row in enumerate(rows) if row is None or row.shape != (embedder.dimensions,)]
    if missing:
        fresh = embedder.embed([embed_text(docs[i].name, docs[i].description) for i in missing])
        for i, vector in zip(missing, fresh, strict=True):
            rows[i] = vector
            entries[i] = entries[i].with_vector(model, vector)
            cache.put(docs[i], entries[i])
        stats.embedded = len(missing)
    return np.stack([r for r in rows if r is not None]) if docs else np.zeros((0, embedder.dimensions), np.float32)
