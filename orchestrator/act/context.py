"""What one Act's tools see: the frozen dependencies of the run and its mutable per-run state, kept apart."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.act.act_io import ActRequest, StepRecord
from orchestrator.act.blackboard import Blackboard
from orchestrator.act.memo import AttemptMemo, MemoStore, SkillMemoFile
from orchestrator.config import Settings
from orchestrator.sandbox.protocol import SandboxJobArea
from orchestrator.sandbox.thumbnails import Thumbnail
from orchestrator.skills.loader import SkillLibrary
from orchestrator.skills.parsed import Skill
from orchestrator.time_budget import TimeBudget
from orchestrator.validate.layout.findings import BRAND_FILE
from orchestrator.validate.stats import ValidationStats


@dataclass(frozen=True)
class ActDeps:
    """What the tools may use; fixed for the whole Act (the services in it keep their own state)."""

    request: ActRequest
    settings: Settings
    library: SkillLibrary
    skill: Skill
    build: SandboxJobArea
    blackboard: Blackboard
    store: MemoStore | None = None
    prior: SkillMemoFile = field(default_factory=SkillMemoFile)
    """What earlier validated runs of this very skill version (``identity``) left in the memo store."""
    identity: str = ""
    """The work identity (:func:`orchestrator.act.memo.work_identity`): the skill folder's tree hash and the sandbox
    image id. Every stored replay key includes it, and the memo file is named by it."""

    @property
    def skill_root(self) -> Path:
        return self.skill.root

    @property
    def brand_file(self) -> Path | None:
        """The goal's ``brand.json`` among the inputs (a user's file or an earlier skill's output), if any: the
        layout check holds the Office outputs to its fonts and colours."""
        inputs = self.request.inputs_dir
        path = inputs / BRAND_FILE if inputs is not None else None
        return path if path is not None and path.is_file() and not path.is_symlink() else None


@dataclass
class ActState:
    """What one Act learns while it runs (never shared between Acts)."""

    step: int = 0
    records: list[StepRecord] = field(default_factory=list)
    memo: AttemptMemo = field(default_factory=AttemptMemo)
    sent: dict[str, int] = field(default_factory=dict)
    """sha256 of content already sent to the model in this conversation → the step that sent it."""
    read_docs: dict[str, str] = field(default_factory=dict)
    """sha256 → summary of documents read this run (saved as digests when the run validates)."""
    script_failures: int = 0
    script_failures_by: dict[str, int] = field(default_factory=dict)
    """Failures per script (``path@sha256``): each script gets one informed retry."""
    script_source: str | None = None
    """All script source of the skill, read once, for hiding it from what commands print."""
    images_viewed: int = 0
    renders: dict[str, Thumbnail] = field(default_factory=dict)
    """``sha256:path`` of an Office file or PDF in build/ → its rendering (by view_image or the thumbnails)."""
    renders_made: int = 0
    """Renderings (LibreOffice conversions) this Act started; capped by ``qa.thumbnail_max_files``."""
    final_outputs: list[str] = field(default_factory=list)
    """What the last finish named as the outputs (relative to build/)."""
    script_hashes: dict[str, str] | None = None
    """sha256 → path of the skill's scripts, read once, so a copy in build/ or inputs/ is never shown."""
    new_replays: dict[str, Any] = field(default_factory=dict)
    stdout_results: list[Any] = field(default_factory=list)
    missing_refs: list[str] = field(default_factory=list)
    validation_stats: ValidationStats = field(default_factory=ValidationStats)
    written: set[str] = field(default_factory=set)
    """Files of build/ this Act wrote (a retry writing what the earlier attempt wrote is still making progress)."""
    replaying: bool = False
    """The Act's opening request was answered from the response cache: it replays an earlier run's conversation, so
    tools answer as they did then (no digests or memo notes that would make the next request differ)."""
    clock: TimeBudget = field(default_factory=lambda: TimeBudget(math.inf))
    """The Act's time; tools that may run long stop by its end (``clock.left_s()``, the loop's rule too)."""


@dataclass(frozen=True)
class ActContext:
    """The pair every tool receives: ``deps`` (what it may use) and ``state`` (what it may update)."""

    deps: ActDeps
    state: ActState
