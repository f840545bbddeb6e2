"""The goal-level request, state and result. The state is plain data so a Celery task can load and save it."""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field

from orchestrator.act.act_io import ActResult, Artifact, Disclosure, Unmet
from orchestrator.act.evidence import THUMBNAILS
from orchestrator.errors import WorkflowError
from orchestrator.llm.usage_ledger import UsageLedger
from orchestrator.skills.versions import SkillsUsed as SkillsUsed
from orchestrator.validate.stats import ValidationStats
from orchestrator.validate.validator import ValidationReport
from orchestrator.workflow.plan import Plan
from orchestrator.workflow.request import GoalRequest


class GoalMetrics(BaseModel):
    """Counts of a goal: its model requests from its ledger, the rest from the plan and every Act's result (see
    ``workflow.budget.goal_metrics``)."""

    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    duration_ms: int = 0
    containers: int = 0
    memo_hits: int = 0
    response_cache_hits: int = 0
    """Model replies answered from the response cache (nothing sent; not in ``model_calls``)."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its own prompt cache (part of ``tokens_in``), where it reports them."""
    disclosure: Disclosure = Disclosure()


class GoalError(BaseModel):
    where: str
    message: str
    next_step: str = ""
    code: str | None = None
    """The raised error's code (``SandboxErrorCode``/``ModelErrorCode`` value) when it has one."""


class Suggestion(BaseModel):
    """A skill close to the goal (the top of its shortlist), offered when the goal could not be served."""

    id: str
    name: str
    description: str = ""


class Replan(BaseModel):
    """One re-plan by Reflect: the step that stayed unmet, why, and what the new plan chose."""

    step: int
    """Index of the step that stayed unmet; the new plan replaces it and every later step."""
    skill: str
    reason: str
    """The failed step's exit reason and what was missing (what the planner was told)."""
    plan_calls: int = 0
    steps: list[str] = []
    """The skills of the new plan's steps (empty when it found none)."""
    outcome: str = ""


MAX_ANSWER_CHARS = 2000


class PointScore(BaseModel):
    """How well the artifacts meet one evaluation point of the plan (``supervisor.response: SCORED``)."""

    point: str
    score: float = Field(ge=0, le=1)
    reason: str = ""


class GoalResult(BaseModel):
    """The overall result of a goal (what ``run --json`` prints)."""

    model_config = ConfigDict(use_attribute_docstrings=True)  # the field docstrings document the result's schema

    job_id: str
    goal: str
    status: Literal["done", "unmet", "failed"]
    artifacts: list[Artifact] = []
    validation: ValidationReport | None = None
    validation_stats: ValidationStats = ValidationStats()
    """All validations of the goal (each skill's finish attempts and the final check): pass rate, violations."""
    metrics: GoalMetrics = GoalMetrics()
    plan: Plan | None = None
    plan_calls: int = 0
    """Model calls of every plan request of the goal (the first plan, its searches, and re-plans)."""
    replans: list[Replan] = []
    skills: list[ActResult] = []
    unmet: list[Unmet] = []
    suggestions: list[Suggestion] = []
    """When no skill fitted: the closest skills (see ``unmet`` for what is missing)."""
    error: GoalError | None = None
    stdout: list[Any] = []
    out_dir: str = ""
    bundle: str | None = None
    evidence_path: str | None = None
    notes: list[str] = []
    """What happened in the output folder beyond the artifacts: files that existed and were replaced, refusals."""
    response: Literal["SUMMARY", "SCORED"] = "SUMMARY"
    """The response strategy the answer follows (``supervisor.response``, ``--response``, goal-line ``response``)."""
    scores: list[PointScore] = []
    """SCORED: each evaluation point of the plan with a score from 0 to 1 and a one-line reason."""
    score: float | None = None
    """SCORED: the mean of ``scores``."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def answer(self) -> str | None:
        """SUMMARY: a short account for the user of what was made — the files, each skill's own summary when it
        finished (the model's words), what is missing and where it stopped. Computed from the result as it is, so
        every driver's result carries it and it never goes stale."""
        if self.response != "SUMMARY":
            return None
        if self.status == "done" and self.plan is not None and self.plan.answered_without_skills:
            assert self.plan.no_skill_needed is not None
            return self.plan.no_skill_needed.answer  # the answer itself, not an account of files
        made = ", ".join(f"{a.path} ({a.size} bytes)" for a in self.artifacts if not _preview(a))
        if self.status == "done":
            lines = [f"Made {made}." if made else "Done; no files were needed."]
        else:
            lines = [f"Not finished ({self.status})." + (f" Kept (partial): {made}." if made else "")]
        for skill in self.skills:
            said = " ".join((skill.final_message or "").split())
            if said:
                lines.append(f"{skill.skill_id}: {said[:400]}")
        lines += [f"Missing: {u.what} — {u.why}" for u in self.unmet[:5]]
        if self.error is not None:
            lines.append(f"Stopped at {self.error.where}: {self.error.message[:300]}")
        return "\n".join(lines)[:MAX_ANSWER_CHARS]


def _preview(artifact: Artifact) -> bool:
    """A file the runtime rendered to look at an output (thumbnails, the PDF they were drawn from), not one made."""
    return artifact.type == "thumbnail" or PurePosixPath(artifact.path).parts[:1] == (THUMBNAILS,)


class GoalState(BaseModel):
    """Everything between the steps of a goal; saved and loaded by the worker tasks."""

    request: GoalRequest
    job_id: str
    out_dir: Path
    work_dir: Path
    plan: Plan | None = None
    ledger: UsageLedger = UsageLedger()
    """Every model request of the goal, recorded once: what every budget and token metric is read from."""
    plan_ms: int = 0
    """Time the plan requests took (the first plan and re-plans)."""
    plan_offered: int = 0
    """Skills the first plan showed the model (L1 lines)."""
    results: list[ActResult] = []
    blackboard: dict[str, Any] = {}
    retried: list[int] = []
    replans: int = 0
    replan_log: list[Replan] = []
    superseded: list[ActResult] = []
    """Results a retry or a re-plan replaced (kept as evidence; their metrics still count)."""
    candidates: list[Suggestion] = []
    """The top of the planner's shortlist (suggested when no skill fits)."""
    published: list[str] = []
    """Output files written by this goal (the catalog lists only these, not older files in the folder)."""
    notes: list[str] = []


CHECKPOINT_VERSION = 4
"""Bumped whenever a saved checkpoint would no longer read back the same (1: the unversioned checkpoints; 2: an
integer step cursor; 3: the conversation's position as the scenario server spells it; 4: the ledger of model
requests in place of counted plan metrics)."""


class Checkpoint(BaseModel):
    """What a worker saves between two phases of a goal: its state, versioned."""

    version: int = CHECKPOINT_VERSION
    state: GoalState
    model_cursor: str = "0"
    """Where a scripted model's conversation stands (``X-Orch-Cursor``, as the scenario server last said)."""

    @classmethod
    def load(cls, data: dict[str, Any]) -> Checkpoint:
        """A saved checkpoint; :class:`WorkflowError` when it was written by another schema version."""
        version = data.get("version", 1) if isinstance(data, dict) else None
        if version != CHECKPOINT_VERSION:
            raise WorkflowError(
                f"the goal's saved state has schema version {version}; this worker reads version {CHECKPOINT_VERSION}",
                where="checkpoint",
                next_step="submit the goal again (its job id with a new suffix) on workers of one version",
            )
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise WorkflowError(
                f"the goal's saved state does not read back: {e.error_count()} problem(s), first at "
                f"{'.'.join(map(str, e.errors()[0]['loc']))[:200]}: {e.errors()[0]['msg'][:200]}",
                where="checkpoint",
                next_step="protect Redis (password, ACL users) and submit the goal again",
            ) from e
