"""The skills library: SKILL.md folders as typed models with L1/L2/L3 progressive disclosure.

``SkillLibrary(root)`` discovers skills, ``list()``/``l1_index()`` give the L1 view, ``l2(id)`` the cut body,
``get(id)`` the full skill with its references, and ``read_text``/``resolve``/``glob`` the confined L3 access.

The names below load on first use: a light module of this package (``skills.versions``, which the job ledger's
records name) is imported without the loader's Markdown and template machinery.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.skills.loader import SkillLibrary
    from orchestrator.skills.parsed import (
        Declarations,
        DisclosedText,
        Problem,
        Reference,
        Skill,
        SkillSummary,
    )
    from orchestrator.skills.read_cache import CachedRead, ReadCache

_HOMES = {
    "CachedRead": "read_cache",
    "ReadCache": "read_cache",
    "SkillLibrary": "loader",
    "Declarations": "parsed",
    "DisclosedText": "parsed",
    "Problem": "parsed",
    "Reference": "parsed",
    "Skill": "parsed",
    "SkillSummary": "parsed",
}

__all__ = [
    "CachedRead",
    "Declarations",
    "DisclosedText",
    "Problem",
    "ReadCache",
    "Reference",
    "Skill",
    "SkillLibrary",
    "SkillSummary",
]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(f"orchestrator.skills.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
