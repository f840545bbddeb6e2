"""The shortlist the planner sees, and the catalog text it is shown as.

Small libraries (up to ``selection.shortlist_threshold`` skills) are shown whole. Larger ones are cut to the
skills retrieval ranks best for the goal (``shortlist_size``). Skills the goal names explicitly are always on it,
first; a ``disable-model-invocation: true`` skill is on it only when named. The catalog text is kept under
``catalog_max_tokens``: descriptions are shortened step by step before any skill is dropped, and a named skill is
never dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from orchestrator.select.explicit import explicit_skills
from orchestrator.select.index import Hit, SkillIndex
from orchestrator.skills.parsed import SkillSummary
from orchestrator.tokens import estimate_tokens

#: Description lengths (characters) tried in turn when the catalog is over its budget; None: the whole text.
_DESCRIPTION_STEPS: tuple[int | None, ...] = (None, 400, 250, 160, 100, 60, 0)


class Shortlist(BaseModel):
    """The skills a planner may choose from for one goal, best first (explicitly named ones at the top)."""

    model_config = ConfigDict(frozen=True)

    skills: list[SkillSummary]
    explicit: list[str] = []
    hits: list[Hit] = []
    library_size: int = 0
    retrieved: bool = False
    """True when retrieval cut the library (it was above the threshold)."""
    restated: str = ""
    """The model's restatement of the goal that was ranked beside it (empty: the goal alone)."""

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.skills]


class Catalog(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    ids: list[str]
    tokens: int
    shortened: bool = False
    dropped: list[str] = []


def model_invocable(skills: Sequence[SkillSummary]) -> list[SkillSummary]:
    """The skills a model may pick on its own (usable at L1, not ``disable-model-invocation``)."""
    return [s for s in skills if s.usable_at_l1 and not s.disable_model_invocation]


def make_shortlist(
    goal: str,
    skills: Sequence[SkillSummary],
    index: SkillIndex | None,
    *,
    threshold: int = 20,
    size: int = 20,
    restated: str | None = None,
) -> Shortlist:
    """The planner's candidates for ``goal`` among ``skills`` (the L1 index); ``index`` covers the invocable ones.
    ``restated``: the goal as the model restated it (:mod:`orchestrator.select.restate`), ranked beside the goal."""
    usable = [s for s in skills if s.usable_at_l1]
    named = explicit_skills(goal, usable)
    by_id = {s.id: s for s in usable}
    invocable = model_invocable(usable)
    first = [by_id[i] for i in named]
    if len(invocable) <= threshold or index is None:
        rest = [s for s in invocable if s.id not in named]
        return Shortlist(skills=first + rest, explicit=named, library_size=len(usable))
    hits = index.search(goal, k=size, exclude=named, also=[restated] if restated else [])
    rest = [by_id[h.id] for h in hits if h.id in by_id]
    return Shortlist(
        skills=first + rest,
        explicit=named,
        hits=hits,
        library_size=len(usable),
        retrieved=True,
        restated=restated or "",
    )


def _line(s: SkillSummary, max_chars: int | None) -> str:
    description = s.description or ""
    if max_chars is not None and len(description) > max_chars:
        description = description[:max_chars].rsplit(" ", 1)[0].rstrip(" ,;:.") + "…" if max_chars else ""
    return f"- {s.id}: {s.name}" + (f" — {description}" if description else "")


def catalog_text(skills: Sequence[SkillSummary], *, max_tokens: int | None = None, keep: Sequence[str] = ()) -> Catalog:
    """The L1 catalog (one line a skill) within ``max_tokens``: shorten descriptions first, then drop the last
    skills (never one in ``keep``)."""
    chosen = list(skills)
    for step in _DESCRIPTION_STEPS:
        text = "\n".join(_line(s, step) for s in chosen)
        if max_tokens is None or estimate_tokens(text) <= max_tokens:
            return Catalog(
                text=text, ids=[s.id for s in chosen], tokens=estimate_tokens(text), shortened=step is not None
            )
    dropped: list[str] = []
    floor = _DESCRIPTION_STEPS[-1]
    while True:
        droppable = [s for s in chosen if s.id not in keep]
        text = "\n".join(_line(s, floor) for s in chosen)
        if estimate_tokens(text) <= (max_tokens or 0) or not droppable:
            return Catalog(
                text=text, ids=[s.id for s in chosen], tokens=estimate_tokens(text), shortened=True, dropped=dropped
            )
        last = droppable[-1]
        chosen.remove(last)
        dropped.append(last.id)
