"""Typed inputs and outputs of one Act (one skill run to completion by a model-driven agent)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config import Budgets
from orchestrator.llm.usage_ledger import Spending
from orchestrator.validate.rules import ExpectedOutputs
from orchestrator.validate.stats import ValidationStats
from orchestrator.validate.validator import ValidationReport

ExitReason = Literal[
    "validated",  # expected outputs produced and validated
    "finished_unvalidated",  # qa.mode=off and the model finished
    "validation_failed",  # the model finished but the outputs did not validate, and it gave up
    "budget_tool_calls",
    "budget_time",
    "budget_tokens",
    "budget_goal",  # the goal's own token or model-call budget is spent
    "reference_cycle",
    "missing_reference",
    "sandbox_violation",
    "stalled",
    "model_error",
    "missing_tool",  # the skill declares a tool the sandbox image lacks
    "not_granted",  # the skill declares network hosts or secrets the operator's egress settings do not grant
    "sandbox_error",  # the Docker engine or the sandbox image failed (not the script)
]
ArtifactType = Literal["file", "log", "screenshot", "thumbnail", "script", "html", "command"]


class ActRequest(BaseModel):
    """What the workflow hands to one Act: the goal, the chosen skill, what must come out, and the budgets."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    goal: str
    skill_id: str
    expected: ExpectedOutputs = ExpectedOutputs()
    constraints: list[str] = []
    inputs_dir: Path | None = None
    """Read-only inputs (user files and outputs of earlier skills), visible to tools as ``inputs/NAME``."""
    budgets: Budgets = Budgets()
    qa_mode: Literal["final", "step", "off"] = "final"
    job_id: str = "act"
    goal_tokens_left: int | None = None
    """What is left of the goal's token budget when this Act starts (None: no goal budget applies)."""
    goal_calls_left: int | None = None
    """What is left of the goal's model-call budget when this Act starts."""
    goal_id: str | None = None
    """The goal (worker job) this Act is a step of; its sandbox containers are labelled with it exactly."""


class Artifact(BaseModel):
    """One entry of the artifact catalog."""

    path: str
    """Relative to the output folder (for files produced in ``build/``: the same relative path)."""
    type: ArtifactType = "file"
    mime: str = "application/octet-stream"
    size: int = 0
    sha256: str = ""
    version: str = ""
    """``act.<artifact>@vN``: the blackboard version of this artifact."""
    partial: bool = False
    metadata: dict[str, Any] = {}


class StepRecord(BaseModel):
    """Evidence of one step of the loop, appended whether the step succeeded or not."""

    step: int
    kind: Literal["tool", "reflect", "model"]
    tool: str | None = None
    reason_short: str = ""
    inputs_digest: str = ""
    ok: bool = True
    error: str | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    ms: int = 0
    diff_summary: str = ""
    file_ids: list[str] = []
    memo_hit: bool = False
    container: dict[str, Any] | None = None
    disclosure: Literal["L2", "L3"] | None = None
    """The disclosure level of what this step sent to the model (SKILL.md body: L2, a reference or file: L3)."""
    dedup: bool = False
    """The step asked for content already sent (or digested earlier): only a note was sent."""
    cache_hit: bool = False
    """The model's reply for this step came from the response cache: nothing was sent, no tokens used."""
    cached_tokens: int = 0
    """Prompt tokens the provider served from its own prompt cache (part of ``tokens_in``)."""
    check_calls: int = 0
    """Model requests of a finish's own semantic check (``qa.mode: step``), besides the step's own request."""


class Disclosure(BaseModel):
    """How much of the skills was disclosed: L1 lines, L2 bodies, L3 files, and repeats answered by a note."""

    l1: int = 0
    l2: int = 0
    l3: int = 0
    dedup_hits: int = 0

    def __add__(self, other: Disclosure) -> Disclosure:
        return Disclosure(
            l1=self.l1 + other.l1,
            l2=self.l2 + other.l2,
            l3=self.l3 + other.l3,
            dedup_hits=self.dedup_hits + other.dedup_hits,
        )


class ActMetrics(BaseModel):
    """Counts of one Act: its model requests from the ledger, the rest from its step records (see
    :meth:`from_records`), never bumped by hand."""

    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    model_calls: int = 0
    duration_ms: int = 0
    disclosure: Disclosure = Disclosure()
    memo_hits: int = 0
    containers: int = 0
    micro_reflects: int = 0
    response_cache_hits: int = 0
    """Model replies answered from the response cache (not counted in ``model_calls``: nothing was sent)."""
    cached_tokens: int = 0
    """Prompt tokens the provider reported as served from its prompt cache."""

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    @classmethod
    def from_records(
        cls, records: Sequence[StepRecord], spent: Spending, *, duration_ms: int = 0,
        disclosed: Disclosure = Disclosure(),
    ) -> ActMetrics:
        """The metrics of ``records`` and of the Act's model requests (``spent``, read from the ledger);
        ``disclosed`` is what the task message itself disclosed (L1, L2)."""
        return cls(
            tokens_in=spent.tokens_in,
            tokens_out=spent.tokens_out,
            tool_calls=sum(r.kind == "tool" for r in records),
            model_calls=spent.model_calls,
            duration_ms=duration_ms,
            disclosure=disclosed
            + Disclosure(
                l2=sum(r.disclosure == "L2" for r in records),
                l3=sum(r.disclosure == "L3" for r in records),
                dedup_hits=sum(r.dedup for r in records),
            ),
            memo_hits=sum(r.memo_hit for r in records),
            containers=sum(r.container is not None for r in records),
            micro_reflects=sum(r.kind == "reflect" for r in records),
            response_cache_hits=spent.cache_hits,
            cached_tokens=spent.cached_tokens,
        )


class RemainingBudgets(BaseModel):
    tool_calls: int
    time_ms: int
    tokens: int
    disk_mb: float


class Unmet(BaseModel):
    what: str
    why: str
    next_step: str = ""


class ActResult(BaseModel):
    """The outcome of one Act. ``status`` is ``done`` only when the outputs validated (or QA is off)."""

    skill_id: str
    status: Literal["done", "unmet", "failed"]
    exit_reason: ExitReason
    where: str = ""
    """Which step it ended in: ``skill:ID``, then the failing tool and container when there was one."""
    next_step: str = ""
    artifacts: list[Artifact] = []
    validation: ValidationReport | None = None
    validation_stats: ValidationStats = ValidationStats()
    """Every validation of this Act (each finish attempt), counted: pass rate and violations by category."""
    evidence_summary: list[StepRecord] = []
    metrics: ActMetrics = ActMetrics()
    remaining_budgets: RemainingBudgets
    unmet: list[Unmet] = []
    final_message: str = ""
    stdout_results: list[Any] = Field(default_factory=list)
    """JSON stdout of successful scripts, for skills whose result is plain stdout (printed by the CLI)."""
