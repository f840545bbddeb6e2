"""Explicit invocation: a goal that names a skill (``$skill-name`` or "use the X skill") always gets it.

A name matches a skill's ``name`` or its id, case-insensitively; when several skills share a name, all of them are
invoked (the planner orders or drops among them, but cannot lose them: see :mod:`orchestrator.workflow.plan`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from orchestrator.skills.parsed import SkillSummary

_DOLLAR = re.compile(r"(?<![\w$])\$([A-Za-z0-9][A-Za-z0-9_./:-]*)")
_USE_THE = re.compile(
    r"\b(?:use|using|with|via|run|apply|invoke)\s+(?:the\s+|my\s+|our\s+)?[`\"'“]?"
    r"([A-Za-z0-9][A-Za-z0-9_./:-]*)[`\"'”]?\s+skill\b",
    re.IGNORECASE,
)


def named_in(goal: str) -> list[str]:
    """The skill names or ids a goal names explicitly, in the order they appear (trailing punctuation dropped)."""
    found: list[tuple[int, str]] = []
    for pattern in (_DOLLAR, _USE_THE):
        found += [(m.start(), m.group(1).rstrip(".,:;/")) for m in pattern.finditer(goal)]
    names: list[str] = []
    for _, name in sorted(found):
        if name and name.lower() not in (n.lower() for n in names):
            names.append(name)
    return names


def explicit_skills(goal: str, skills: Iterable[SkillSummary]) -> list[str]:
    """Ids of every skill the goal names, by ``name`` or by id; unknown names are ignored."""
    wanted = [n.lower() for n in named_in(goal)]
    if not wanted:
        return []
    ids: list[str] = []
    pool = list(skills)
    for name in wanted:
        for s in pool:
            if name in ((s.name or "").lower(), s.id.lower()) and s.id not in ids:
                ids.append(s.id)
    return ids
