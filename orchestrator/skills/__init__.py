"""The skills library: SKILL.md folders as typed models with L1/L2/L3 progressive disclosure.

``SkillLibrary(root)`` discovers skills, ``list()``/``l1_index()`` give the L1 view, ``l2(id)`` the cut body,
``get(id)`` the full skill with its references, and ``read_text``/``resolve``/``glob`` the confined L3 access.
"""

from orchestrator.skills.cache import CachedRead, ReadCache
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.models import (
    Declarations,
    DisclosedText,
    Problem,
    Reference,
    Skill,
    SkillSummary,
)

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
