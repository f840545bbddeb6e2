"""One phase of one job: acquire the lease, load the state, run the workflow phase, save, enqueue the next.

This is the body of every task, kept free of Celery so it reads as the job's state machine. The workflow
functions (``start_goal`` / ``plan_goal`` / ``act_step`` / ``reflect_replan`` / ``reflect_finish``) do the work;
everything here is bookkeeping: the ledger transitions written before and after the work, the heartbeat, the
trace, the clean-up. A Reflect that re-plans queues the new plan's first act instead of ending the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded

from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError, WorkflowError
from orchestrator.logs import get_logger, mask_value
from orchestrator.tracing import emit_goal_span, tracer, under_goal
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.heartbeat import Heartbeat
from orchestrator.worker.inputs import InputRef, materialise
from orchestrator.worker.jobfiles import claim_output, evidence_dir, job_out_dir, write_owner
from orchestrator.worker.ledger import Acquire, JobRecord, LeaseLost, Ledger
from orchestrator.worker.limits import SoftLimitReached, soft_limit_interrupts
from orchestrator.worker.submit import MB
from orchestrator.worker.tenancy import (
    Refused,
    check_checkpoint,
    check_job_id,
    job_work_dir,
    library_root,
    scenario_file,
)
from orchestrator.workflow import phases
from orchestrator.workflow.evidence import save_evidence
from orchestrator.workflow.judge import error_result
from orchestrator.workflow.machine import advance
from orchestrator.workflow.models import Checkpoint, GoalResult, GoalState
from orchestrator.workflow.phases import Phase
from orchestrator.workflow.readiness import is_environment_error
from orchestrator.workflow.request import BudgetOverrides, GoalRequest, budgeted
from orchestrator.workflow.runtime import Runtime, RuntimeSource
from orchestrator.workflow.steps import start_goal

log = get_logger("orchestrator.worker")

Enqueue = Callable[[JobRecord, str], None]
EventSink = Callable[[str, dict[str, Any]], None]


class PhaseBusy(Exception):
    """Another worker holds the job's lease right now: try this task again shortly."""


class GiveBack(Exception):
    """The phase goes back to the queue instead of failing its job: bounded by ``worker.max_attempts``."""

    def __init__(self, error: OrchestratorError) -> None:
        super().__init__(error.message)
        self.error = error


class WorkerUnfit(GiveBack):
    """An error of this worker's own environment (readiness.is_environment_error): not the job's fault, and this
    worker stands by until it is ready again."""


class Retryable(GiveBack):
    """An error that says trying again may help (``OrchestratorError.retryable``: a rate limit, a lost stream)."""


@dataclass
class PhaseContext:
    """What a phase runs with: the worker's settings, ledger and runtime factory, and how to queue a phase."""

    settings: Settings
    ledger: Ledger
    worker: str
    enqueue: Enqueue
    runtimes: RuntimeSource
    on_event: EventSink = lambda name, data: None
    standby: Callable[[str], None] = lambda why: None
    """Stop this worker taking work until its readiness checks pass again."""

    def kill_containers(self, job_id: str) -> int:
        return self.runtimes.kill_containers(self.settings, job_id)


@dataclass
class _Outcome:
    checkpoint: Checkpoint | None
    next: str
    fields: dict[str, Any] = field(default_factory=dict)


def run_phase(pc: PhaseContext, job_id: str, phase_token: str) -> str:
    """Run the phase ``phase_token`` names if it is the job's next phase; returns what happened (``ok``, ``stale``…)."""
    w = pc.settings.worker
    outcome, token, attempt = pc.ledger.acquire(
        job_id, phase_token, worker=pc.worker, lease_s=w.stale_after_s, max_attempts=w.max_attempts
    )
    if outcome is Acquire.BUSY:
        raise PhaseBusy(job_id)
    if outcome is Acquire.EXHAUSTED:
        job_ended(pc, job_id)
    if outcome is not Acquire.OK:
        log.info("phase.skipped", job=job_id, phase=phase_token, outcome=outcome)
        return outcome.value
    record = pc.ledger.get(job_id)
    assert record is not None
    if record.job_id != check_job_id(job_id):  # the record's own id field must be its key's
        record = record.model_copy(update={"job_id": job_id, "out": "\0altered"})
    phase = phases.parse(phase_token)
    if isinstance(phase, phases.Act):
        skill = record.plan[phase.index] if phase.index < len(record.plan) else None
        pc.ledger.update(job_id, step=phase.index, skill=skill)
        record = record.model_copy(update={"step": phase.index, "skill": skill})
    if attempt > 1:
        pc.kill_containers(job_id)  # what an earlier attempt left behind
    started = time.time()
    entry = {"phase": phase_token, "worker": pc.worker, "attempt": attempt, "start": started}
    # A lease lost mid-phase (the job cancelled, or taken over) interrupts the phase: its work would be dropped.
    try:
        with Heartbeat(pc.ledger, job_id, token, interval_s=w.heartbeat_s, lease_s=w.stale_after_s, interrupt=True):
            done = _run_traced(pc, record, phase, attempt)
    except GiveBack as e:
        return _give_back(pc, record, phase_token, token, entry, e)
    done.fields["timings"] = {**record.timings, **done.fields.get("timings", {}), phase_token: time.time() - started}
    try:
        pc.ledger.commit_phase(job_id, token, done.checkpoint, next=done.next, **done.fields)
    except LeaseLost:
        log.warning("phase.lease_lost", job=job_id, phase=phase_token)
        pc.ledger.release(job_id, token)  # still ours when the job was cancelled: let a re-run start at once
        pc.ledger.add_history(job_id, {**entry, "end": time.time(), "outcome": "lease_lost"})
        return "lease_lost"
    pc.ledger.add_history(job_id, {**entry, "end": time.time(), "outcome": done.next})
    ended = done.next == phases.token(phases.Done())
    if not ended:
        pc.enqueue(pc.ledger.get(job_id) or record, done.next)
    pc.ledger.release(job_id, token)
    if ended:
        job_ended(pc, job_id)
    return "ok"


def _give_back(pc: PhaseContext, record: JobRecord, phase: str, token: str, entry: dict[str, Any], e: GiveBack) -> str:
    """The phase goes back to the queue (from its last saved state) for another attempt; the job fails only at the
    attempts cap. A worker whose own environment failed (model server, key, engine, image) stands by meanwhile."""
    pc.kill_containers(record.job_id)
    why = mask_value(f"worker {pc.worker} could not run {phase}: {e.error.message}")
    log.warning("phase.given_back", job=record.job_id, phase=phase, error=why)
    if isinstance(e, WorkerUnfit):
        pc.standby(why)
    outcome = pc.ledger.give_back(record.job_id, token, why=why, max_attempts=pc.settings.worker.max_attempts)
    pc.ledger.add_history(record.job_id, {**entry, "end": time.time(), "outcome": f"given_back:{outcome}",
                                          "reason": why})
    if outcome == "queued":
        pc.enqueue(pc.ledger.get(record.job_id) or record, phase)
    elif outcome == "exhausted":
        job_ended(pc, record.job_id)
    return "given_back" if outcome == "queued" else outcome


def _run_traced(pc: PhaseContext, record: JobRecord, phase: Phase, attempt: int) -> _Outcome:
    name = phases.token(phase)
    attrs: dict[str, Any] = {"orch.job_id": record.job_id, "orch.phase": name, "orch.attempt": attempt}
    saved: Checkpoint | None = None
    with _goal_context(record), tracer().start_as_current_span(phase.kind.value, attributes=attrs) as span:
        try:
            with soft_limit_interrupts():
                saved = _saved_state(pc, record, phase)
                return _advance(pc, record, saved, phase, attempt)
        except (SoftLimitReached, SoftTimeLimitExceeded):
            killed = pc.kill_containers(record.job_id)
            span.set_attribute("orch.error", "soft time limit")
            why = f"{name} ran past its soft time limit; {killed} sandbox container(s) of the job were killed"
            return _failed(pc, record, saved, WorkflowError(why, where=name, next_step="raise the budgets"), name)
        except OrchestratorError as e:
            span.set_attribute("orch.error", e.message)
            if is_environment_error(e):
                raise WorkerUnfit(e) from e
            if e.retryable:
                raise Retryable(e) from e
            return _failed(pc, record, saved, e, name)
        except (redis.RedisError, GiveBack):
            raise  # the ledger is unreachable (the sweep retries once Redis is back), or this worker is unfit
        except Exception as e:  # a bug must end the job with its reason, not look like a dead worker three times
            log.exception("phase.crashed", job=record.job_id, phase=name)
            span.set_attribute("orch.error", repr(e))
            why = f"unexpected error in {name}: {type(e).__name__}: {e}"
            return _failed(pc, record, saved, WorkflowError(why, where=name, next_step="report it with the logs"), name)


@contextmanager
def _goal_context(record: JobRecord) -> Iterator[None]:
    if record.trace_id and record.span_id:
        with under_goal(record.trace_id, record.span_id):
            yield
    else:
        yield


def _saved_state(pc: PhaseContext, record: JobRecord, phase: Phase) -> Checkpoint:
    """The state the phase starts from: a new goal's (its folders made, inputs staged) for Plan, else the last saved."""
    if isinstance(phase, phases.Plan):
        req = record.request
        settings = job_settings(pc.settings, req)  # budgets within the ceilings, or the job fails here
        request = GoalRequest(
            goal=record.goal,
            inputs=_received_inputs(pc, record),
            constraints=req.get("constraints", []),
            job_id=record.job_id,
            response=req.get("response"),
        )
        out_dir = job_out_dir(pc.settings, record)
        claim_output(pc.settings, out_dir, record)
        state = start_goal(request, out_dir, settings)
        write_owner(pc.settings, out_dir, record)
        return Checkpoint(state=state)
    saved = pc.ledger.load_checkpoint(record.job_id)
    if saved is None:
        raise Refused(f"no saved state for {record.job_id} before {phases.token(phase)}", where="checkpoint")
    check_checkpoint(saved.state, record.job_id, pc.settings)  # what Redis says is input too
    return saved


def _received_inputs(pc: PhaseContext, record: JobRecord) -> list[Path]:
    """The job's input files, written from their blobs in Redis into the job's own folder (never a named path)."""
    refs = [InputRef.model_validate(item) for item in record.request.get("inputs") or []]
    caps = pc.settings.job_inputs
    store = BlobStore(pc.ledger.r, max_bytes=int(caps.file_max_mb * MB), ttl_s=caps.ttl_s)
    return materialise(refs, store, job_work_dir(pc.settings, record.job_id) / "received")


def _advance(pc: PhaseContext, record: JobRecord, saved: Checkpoint, phase: Phase, attempt: int) -> _Outcome:
    """One transition of the goal machine, and what the ledger learns from it."""
    req = record.request
    settings = job_settings(pc.settings, req)
    scripts_before = _scripts_s(saved.state)
    with pc.runtimes.open(
        settings,
        library_root(settings, req.get("skills")),  # registered libraries only, checked again here
        req.get("model") or settings.model.name,
        scenario_guard=lambda value: scenario_file(settings, value),  # never a file outside the scenario folders
        job_id=record.job_id,
        cursor=saved.model_cursor,
        on_event=lambda name, data: pc.on_event(name, {"job": record.job_id, **data}),
    ) as rt:
        state, nxt = advance(saved.state, phase, rt)
        fields = _record_fields(record, saved.state, state, phase, rt)
        cursor = rt.cursor(saved.model_cursor)
        unfit = next((e for e in rt.model_errors if is_environment_error(e)), None)
    if unfit is not None:  # the Act turned it into a failed step: it was this worker's model server
        raise WorkerUnfit(unfit)
    fields["timings"] = {
        "model": record.timings.get("model", 0.0) + rt.model_seconds,
        "scripts": record.timings.get("scripts", 0.0) + max(0.0, _scripts_s(state) - scripts_before),
    }
    out = _Outcome(Checkpoint(state=state, model_cursor=cursor), phases.token(nxt), fields)
    if isinstance(nxt, phases.Done):
        assert nxt.result is not None
        _finish(pc, record, out, nxt.result)
    return out


def _record_fields(record: JobRecord, before: GoalState, after: GoalState, phase: Phase, rt: Runtime) -> dict[str, Any]:
    """The ledger's view of a transition: the plan when it changed, the skill versions chosen and loaded."""
    fields: dict[str, Any] = {}
    skills = record.skills.model_copy(deep=True)
    chosen = [s.skill for s in after.plan.steps] if after.plan is not None else []
    if isinstance(phase, phases.Plan) or before.plan is None or chosen != [s.skill for s in before.plan.steps]:
        fields.update(plan=chosen, steps_total=len(chosen))
        skills.chosen = rt.skill_versions(chosen)
        if isinstance(phase, phases.Plan):
            skills.available = rt.skill_versions([s.id for s in rt.library.list()])
    if isinstance(phase, phases.Act):
        act = after.results[phase.index]
        fields.update(step=phase.index, skill=act.skill_id)
        skills.loaded = [v for v in skills.loaded if v.id != act.skill_id] + rt.skill_versions([act.skill_id])
    if skills != record.skills:
        fields["skills"] = skills.model_dump()
    return fields


def _finish(pc: PhaseContext, record: JobRecord, out: _Outcome, result: GoalResult) -> None:
    result.metrics.duration_ms = int((time.time() - (record.started_at or record.submitted_at)) * 1000)
    result.evidence_path = save_evidence(result, evidence_dir(pc.settings, record))
    data = mask_value(result.model_dump(mode="json", by_alias=True))
    out.fields.update(
        state=result.status,
        result=data,
        artifacts=data.get("artifacts", []),
        finished_at=time.time(),
        reason=(data.get("error") or {}).get("message"),  # masked, like the rest of what the ledger keeps
    )


def _failed(
    pc: PhaseContext, record: JobRecord, saved: Checkpoint | None, e: OrchestratorError, where: str
) -> _Outcome:
    """A phase that raised: the job ends ``failed`` saying where and why, with what the last saved state holds
    (its plan, metrics and the artifacts of the steps before), as ``run`` reports it."""
    log.warning("phase.failed", job=record.job_id, phase=where, error=e.message)
    state = saved.state if saved is not None else _bare_state(pc.settings, record)
    out = _Outcome(None, phases.token(phases.Done()))
    _finish(pc, record, out, error_result(state, e, where))
    return out


def _bare_state(settings: Settings, record: JobRecord) -> GoalState:
    """The state of a goal that failed before it had one (its output folder could not be used, say)."""
    return GoalState(
        request=GoalRequest(goal=record.goal, job_id=record.job_id),
        job_id=record.job_id,
        out_dir=settings.output_root / record.job_id,
        work_dir=settings.cache_dir / "jobs" / record.job_id,
    )


def job_ended(pc: PhaseContext, job_id: str) -> None:
    record = pc.ledger.get(job_id)
    if record is None or not record.trace_id or not record.span_id:
        return
    emit_goal_span(
        record.trace_id,
        record.span_id,
        start_s=record.submitted_at,
        end_s=record.finished_at or time.time(),
        attributes={"orch.job_id": job_id, "orch.state": record.state, "orch.attempts": record.attempts},
    )
    pc.on_event("job.ended", {"job": job_id, "state": record.state})


def job_settings(settings: Settings, request: dict[str, Any]) -> Settings:
    """The deployment's settings with the job's budgets applied, checked again against the ceilings."""
    return budgeted(settings, BudgetOverrides.model_validate(request.get("budgets") or {}))


def _scripts_s(state: GoalState) -> float:
    return float(
        sum((rec.container or {}).get("elapsed_ms", 0) / 1000 for r in state.results for rec in r.evidence_summary)
    )
