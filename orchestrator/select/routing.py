"""A routing check for skill authors: which skills a router would confuse, and which no goal reaches.

Two skills *overlap* when what they say they are for is so alike that a goal meant for one finds the other: the
cosine similarity of the same sentence vectors the ranking uses (name and description), or, when the library is
ranked by words only, the share of description terms they have in common (Jaccard). A skill is *unreached* when
none of the goals of a goals file ranks it among the first ``k`` skills of its shortlist (the ranking the planner
sees, named skills first), the way ``bench selection`` counts a hit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, ValidationError

from orchestrator.errors import ConfigError
from orchestrator.select.index import SkillIndex
from orchestrator.select.lexical import bilingual_terms
from orchestrator.select.shortlist import make_shortlist
from orchestrator.skills.parsed import SkillSummary

#: Cosine of two skills' vectors from which they are reported as overlapping (MiniLM: paraphrases score 0.6-0.9,
#: skills of one family that differ in their object 0.5-0.7, unrelated ones below 0.3).
SEMANTIC_THRESHOLD = 0.8
#: Share of description terms in common from which two skills overlap when ranking by words only.
LEXICAL_THRESHOLD = 0.6
MAX_PAIRS = 200
ROUTE_GOAL_MAX_CHARS = 4000

Measure = Literal["embedding-cosine", "word-jaccard"]


class Overlap(BaseModel):
    a: str
    b: str
    similarity: float


class Unreached(BaseModel):
    id: str
    name: str
    description: str


class RouteReport(BaseModel):
    skills: int
    measure: Measure
    threshold: float
    overlaps: list[Overlap]
    """Pairs of skills at or above the threshold, most alike first (at most ``MAX_PAIRS``)."""
    goals: int = 0
    k: int = 10
    unreached: list[Unreached] = []
    """With goals: skills no goal ranks among its first ``k`` (in library order)."""
    reached: dict[str, int] = {}
    """With goals: for each skill some goal reaches, how many goals do."""


def overlaps(index: SkillIndex, threshold: float | None = None) -> tuple[Measure, float, list[Overlap]]:
    """The measure used, its threshold and the overlapping pairs of the skills in ``index``."""
    vectors = index.vectors
    ids = [d.id for d in index.docs]
    if vectors is not None and len(ids) > 1:
        limit = SEMANTIC_THRESHOLD if threshold is None else threshold
        return "embedding-cosine", limit, _pairs(ids, np.asarray(vectors @ vectors.T, dtype=np.float32), limit)
    limit = LEXICAL_THRESHOLD if threshold is None else threshold
    terms = [set(bilingual_terms(f"{d.name} {d.description}")) for d in index.docs]
    similarity = np.zeros((len(ids), len(ids)), dtype=np.float32)
    for i in range(len(ids)):
        for j in range(i + 1, len(ids)):
            union = len(terms[i] | terms[j])
            similarity[i, j] = len(terms[i] & terms[j]) / union if union else 0.0
    return "word-jaccard", limit, _pairs(ids, similarity, limit)


def _pairs(ids: list[str], similarity: np.ndarray, threshold: float) -> list[Overlap]:
    rows, cols = np.nonzero(np.triu(similarity >= threshold, k=1))
    found = [
        Overlap(a=ids[i], b=ids[j], similarity=round(float(similarity[i, j]), 3))
        for i, j in zip(rows, cols, strict=True)
    ]
    return sorted(found, key=lambda o: (-o.similarity, o.a, o.b))[:MAX_PAIRS]


def reach(
    goals: Sequence[str], skills: Sequence[SkillSummary], index: SkillIndex, k: int
) -> tuple[list[Unreached], dict[str, int]]:
    """Skills none of ``goals`` ranks in its first ``k``, and how many goals reach each of the others."""
    counts: dict[str, int] = {}
    for goal in goals:
        for skill_id in make_shortlist(goal, skills, index, threshold=0, size=k).ids[:k]:
            counts[skill_id] = counts.get(skill_id, 0) + 1
    unreached = [
        Unreached(id=d.id, name=d.name, description=d.description[:300]) for d in index.docs if d.id not in counts
    ]
    return unreached, dict(sorted(counts.items(), key=lambda c: (-c[1], c[0])))


def route_check(
    skills: Sequence[SkillSummary],
    index: SkillIndex,
    goals: Sequence[str] = (),
    *,
    k: int = 10,
    threshold: float | None = None,
) -> RouteReport:
    """The routing check of a library: ``skills`` is its L1 index, ``index`` the ranking over its invocable
    skills."""
    measure, limit, pairs = overlaps(index, threshold)
    report = RouteReport(skills=len(index.docs), measure=measure, threshold=limit, overlaps=pairs, k=k)
    if goals:
        report.goals = len(goals)
        report.unreached, report.reached = reach(goals, skills, index, k)
    return report


class _GoalLine(BaseModel):
    goal: str = Field(min_length=1, max_length=ROUTE_GOAL_MAX_CHARS)


def read_goals(path: Path) -> list[str]:
    """Goals of a file: JSON lines with a ``goal`` (``bench selection``'s format; other keys ignored) or plain
    lines of text; blank lines and ``#`` comments skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read goals file {path}: {e}", where="route-check", path=str(path)) from e
    goals = []
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if not text.startswith("{"):
            goals.append(text[:ROUTE_GOAL_MAX_CHARS])
            continue
        try:
            goals.append(_GoalLine.model_validate(json.loads(text)).goal)
        except (ValueError, ValidationError) as e:
            raise ConfigError(
                f"{path}:{number}: not a goal line ({e})",
                where="route-check",
                next_step='write one goal per line, as text or as {"goal": TEXT}',
            ) from e
    return goals
