"""The ledger's side of a phase: the state it starts from, and what the ledger learns from its end.

``worker.phases`` runs a phase (lease, heartbeat, one ``advance``, commit); this module reads the job record into a
goal state and writes what the goal machine did back as ledger fields.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError
from orchestrator.logs import get_logger, mask_value
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.inputs import materialise
from orchestrator.worker.jobfiles import claim_output, evidence_dir, job_out_dir, write_owner
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import JobRecord, JobRequest
from orchestrator.worker.submit import MB
from orchestrator.worker.tenancy import Refused, check_checkpoint, check_record, job_work_dir
from orchestrator.worker.views import unmet_reason
from orchestrator.workflow import phases
from orchestrator.workflow.evidence import save_evidence
from orchestrator.workflow.folders import out_folder, work_folder
from orchestrator.workflow.goal import Checkpoint, GoalResult, GoalState
from orchestrator.workflow.judge import error_result
from orchestrator.workflow.phases import Phase
from orchestrator.workflow.request import BudgetOverrides, GoalRequest, budgeted
from orchestrator.workflow.runtime import Runtime
from orchestrator.workflow.steps import start_goal

log = get_logger("orchestrator.worker")


@dataclass
class PhaseOutcome:
    """What a phase leaves: the checkpoint to save (None: keep the last), the next token, the ledger fields."""

    checkpoint: Checkpoint | None
    next: str
    fields: dict[str, Any] = field(default_factory=dict)


def job_settings(settings: Settings, request: JobRequest | None) -> Settings:
    """The deployment's settings with the job's budgets applied, checked again against the ceilings."""
    return budgeted(settings, request.budgets if request is not None else BudgetOverrides())


def saved_state(settings: Settings, ledger: Ledger, record: JobRecord, phase: Phase) -> Checkpoint:
    """The state the phase starts from: a new goal's (its folders made, inputs staged) for the first Plan, else the
    last saved."""
    check_record(record)  # the ledger is input too: nothing it names is used before it is checked
    if isinstance(phase, phases.Plan) and phase.step is None:
        req = record.request
        budgets = job_settings(settings, req)  # budgets within the ceilings, or the job fails here
        request = GoalRequest(
            goal=record.goal,
            inputs=_received_inputs(settings, ledger, record),
            constraints=req.constraints if req is not None else [],
            job_id=record.job_id,
            response=req.response if req is not None else None,
        )
        out_dir = job_out_dir(settings, record)
        claim_output(settings, out_dir, record)
        state = start_goal(request, out_dir, budgets)
        write_owner(settings, out_dir, record)
        return Checkpoint(state=state)
    saved = ledger.load_checkpoint(record.job_id)
    if saved is None:
        raise Refused(f"no saved state for {record.job_id} before {phases.token(phase)}", where="checkpoint")
    check_checkpoint(saved.state, record.job_id, settings)  # what Redis says is input too
    return saved


def _received_inputs(settings: Settings, ledger: Ledger, record: JobRecord) -> list[Path]:
    """The job's input files, written from their blobs in Redis into the job's own folder (never a named path)."""
    refs = record.request.inputs if record.request is not None else []
    caps = settings.job_inputs
    store = BlobStore(ledger.r, max_bytes=int(caps.file_max_mb * MB), ttl_s=caps.ttl_s)
    return materialise(refs, store, job_work_dir(settings, record.job_id) / "received")


def record_fields(record: JobRecord, before: GoalState, after: GoalState, phase: Phase, rt: Runtime) -> dict[str, Any]:
    """The ledger's view of a transition: the plan when it changed, the skill versions chosen and loaded."""
    fields: dict[str, Any] = {}
    skills = record.skills.model_copy(deep=True)
    chosen = [s.skill for s in after.plan.steps] if after.plan is not None else []
    if isinstance(phase, phases.Plan) or before.plan is None or chosen != [s.skill for s in before.plan.steps]:
        fields.update(plan=chosen, steps_total=len(chosen))
        skills.chosen = rt.skill_versions(chosen)
        if isinstance(phase, phases.Plan) and phase.step is None:
            skills.available = rt.skill_versions([s.id for s in rt.library.list()])
    if isinstance(phase, phases.Act):
        act = after.results[phase.index]
        fields.update(step=phase.index, skill=act.skill_id)
        skills.loaded = [v for v in skills.loaded if v.id != act.skill_id] + rt.skill_versions([act.skill_id])
    if skills != record.skills:
        fields["skills"] = skills.model_dump()
    return fields


def finish(settings: Settings, record: JobRecord, out: PhaseOutcome, result: GoalResult) -> None:
    result.metrics.duration_ms = int((time.time() - (record.started_at or record.submitted_at)) * 1000)
    result.evidence_path = save_evidence(result, evidence_dir(settings, record))
    data = mask_value(result.model_dump(mode="json", by_alias=True))
    out.fields.update(
        state=result.status,
        result=data,
        artifacts=data.get("artifacts", []),
        finished_at=time.time(),
        reason=_reason(result.status, data),  # masked, like the rest of what the ledger keeps
    )


def _reason(status: str, data: dict[str, Any]) -> str | None:
    """What the ledger says about how a job ended: a failure's message, an unmet goal's what and why."""
    if status == "unmet":
        return unmet_reason(data)
    return (data.get("error") or {}).get("message")


def failed(
    settings: Settings, record: JobRecord, saved: Checkpoint | None, e: OrchestratorError, where: str
) -> PhaseOutcome:
    """A phase that raised: the job ends ``failed`` saying where and why, with what the last saved state holds
    (its plan, metrics and the artifacts of the steps before), as ``run`` reports it."""
    log.warning("phase.failed", job=record.job_id, phase=where, error=e.message)
    state = saved.state if saved is not None else _bare_state(settings, record)
    out = PhaseOutcome(None, phases.token(phases.Done()))
    finish(settings, record, out, error_result(state, e, where))
    return out


def _bare_state(settings: Settings, record: JobRecord) -> GoalState:
    """The state of a goal that failed before it had one (its output folder could not be used, say)."""
    return GoalState(
        request=GoalRequest(goal=record.goal, job_id=record.job_id),
        job_id=record.job_id,
        out_dir=out_folder(settings.output_root, record.job_id),
        work_dir=work_folder(settings.cache_dir, record.job_id),
    )


def scripts_s(state: GoalState) -> float:
    return float(
        sum((rec.container or {}).get("elapsed_ms", 0) / 1000 for r in state.results for rec in r.evidence_summary)
    )
