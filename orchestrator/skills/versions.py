"""Which version of a skill ran: the hash of its whole folder (``skills.tree.tree_hash``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from orchestrator.errors import OrchestratorError
from orchestrator.skills.tree import tree_hash

if TYPE_CHECKING:  # the job ledger's records name skill versions: they load without the library's parser
    from orchestrator.skills.loader import SkillLibrary


class SkillVersion(BaseModel):
    id: str
    sha256: str
    """The skill folder's content hash (every entry's path, kind and bytes)."""


class SkillsUsed(BaseModel):
    """The skills a goal could choose from, the ones its plan chose and the ones its steps loaded."""

    available: list[SkillVersion] = []
    chosen: list[SkillVersion] = []
    loaded: list[SkillVersion] = []


def skill_versions(library: SkillLibrary, skill_ids: Iterable[str]) -> list[SkillVersion]:
    """The versions of ``skill_ids`` (each once; an id the library cannot resolve is left out)."""
    out = []
    for skill_id in dict.fromkeys(skill_ids):
        try:
            folder = library.resolve(skill_id, "SKILL.md").parent
        except OrchestratorError:
            continue
        out.append(SkillVersion(id=skill_id, sha256=tree_hash(folder)))
    return out
