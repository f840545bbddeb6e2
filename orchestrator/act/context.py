"""Everything one Act's tools can touch, in one place, passed explicitly to every tool."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.act.blackboard import Blackboard
from orchestrator.act.memo import AttemptMemo, MemoStore, SkillMemoFile
from orchestrator.act.models import ActMetrics, ActRequest, StepRecord
from orchestrator.act.workspace import BuildArea
from orchestrator.config import Settings
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.models import Skill
from orchestrator.validate.stats import ValidationStats


@dataclass
class ActContext:
    request: ActRequest
    settings: Settings
    library: SkillLibrary
    skill: Skill
    build: BuildArea
    blackboard: Blackboard
    store: MemoStore | None
    prior: SkillMemoFile = field(default_factory=SkillMemoFile)
    memo: AttemptMemo = field(default_factory=AttemptMemo)
    metrics: ActMetrics = field(default_factory=ActMetrics)
    step: int = 0
    sent: dict[str, int] = field(default_factory=dict)
    """sha256 of content already sent to the model in this conversation → the step that sent it."""
    read_docs: dict[str, str] = field(default_factory=dict)
    """sha256 → summary of documents read this run (saved as digests when the run validates)."""
    script_failures: int = 0
    new_replays: dict[str, Any] = field(default_factory=dict)
    stdout_results: list[Any] = field(default_factory=list)
    missing_refs: list[str] = field(default_factory=list)
    records: list[StepRecord] = field(default_factory=list)
    validation_stats: ValidationStats = field(default_factory=ValidationStats)

    @property
    def skill_root(self) -> Path:
        return self.skill.root
