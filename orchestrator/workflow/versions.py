"""The skill versions a goal used (``skills.versions``) as the job ledger records them.

A module of its own so the ledger, which commands such as ``jobs ID`` read and which must start fast, names them
without loading the goal's models (and through them the whole Act).
"""

from orchestrator.skills.versions import SkillsUsed, SkillVersion

__all__ = ["SkillVersion", "SkillsUsed"]
