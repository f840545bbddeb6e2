"""The skill index: what retrieval knows about each skill, built once per library state.

Each skill's index entry (its terms per field, and its embedding when the semantic ranker is on) is derived from the
SKILL.md bytes only, so it is cached under ``ORCH_CACHE_DIR/select/`` by the sha256 of those bytes: a library where
one skill changed re-derives that one entry. The BM25 matrices are rebuilt from the cached terms (milliseconds for a
thousand skills).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from orchestrator.logs import get_logger
from orchestrator.select.lexical import FIELD_WEIGHTS, LexicalRanker, bilingual_terms, tokenize
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.models import SkillSummary

_log = get_logger("orchestrator.select")

#: Bumped whenever tokenisation or the entry format changes, so old cache entries are ignored.
INDEX_VERSION = "4"
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


def _terms(doc: SkillDoc) -> dict[str, list[str]]:
    return {
        "name": tokenize(_name_text(doc)),
        "description": bilingual_terms(doc.description),
        "body": bilingual_terms(doc.body),
    }


class EntryCache:
    """Per-skill index entries on disk, keyed by content: ``<dir>/<sha[:2]>/<sha>-<id digest>.json``."""

    def __init__(self, directory: Path | None) -> None:
        self.dir = directory / "select" / f"v{INDEX_VERSION}" if directory is not None else None

    def _path(self, doc: SkillDoc) -> Path | None:
        if self.dir is None or not doc.sha256:
            return None
        # The id is part of the key: the name field holds it, so a moved skill gets new terms.
        id_digest = hashlib.sha256(doc.id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return self.dir / doc.sha256[:2] / f"{doc.sha256}-{id_digest}.json"

    def get(self, doc: SkillDoc) -> dict[str, list[str]] | None:
        path = self._path(doc)
        if path is None:
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or set(data) != {"name", "description", "body"}:
            return None
        return data

    def put(self, doc: SkillDoc, terms: dict[str, list[str]]) -> None:
        path = self._path(doc)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(terms, ensure_ascii=False), encoding="utf-8")
            tmp.replace(path)
        except OSError as e:  # a read-only cache only costs time
            _log.warning("select.cache_write_failed", path=str(path), error=str(e))


class SkillIndex:
    """Ranks skills for a query. Build with :meth:`build`; ``search`` never sees skills it was not built with."""

    def __init__(self, docs: Sequence[SkillDoc], fields: dict[str, list[list[str]]], stats: IndexStats) -> None:
        self.docs = list(docs)
        self.by_id = {d.id: d for d in self.docs}
        self.stats = stats
        self._lexical = LexicalRanker(fields, FIELD_WEIGHTS)

    @classmethod
    def build(cls, docs: Sequence[SkillDoc], cache_dir: Path | None = None) -> SkillIndex:
        started = time.perf_counter()
        cache = EntryCache(cache_dir)
        fields: dict[str, list[list[str]]] = {"name": [], "description": [], "body": []}
        stats = IndexStats(skills=len(docs))
        for doc in docs:
            terms = cache.get(doc)
            if terms is None:
                terms = _terms(doc)
                cache.put(doc, terms)
                stats.built += 1
            else:
                stats.reused += 1
            for name in fields:
                fields[name].append(terms[name])
        index = cls(docs, fields, stats)
        stats.index_ms = int((time.perf_counter() - started) * 1000)
        _log.debug("select.indexed", **stats.model_dump())
        return index

    def scores(self, query: str) -> np.ndarray:
        return self._lexical.scores(query)

    def search(self, query: str, k: int = 20, *, exclude: Sequence[str] = ()) -> list[Hit]:
        """The ``k`` best skills for ``query`` (score > 0 only), best first; ties keep id order."""
        if not self.docs:
            return []
        scores = self.scores(query)
        skip = set(exclude)
        order = np.argsort(-scores, kind="stable")
        hits: list[Hit] = []
        for i in order:
            if scores[i] <= 0 or len(hits) >= k:
                break
            if self.docs[i].id not in skip:
                hits.append(Hit(id=self.docs[i].id, score=round(float(scores[i]), 4)))
        return hits
