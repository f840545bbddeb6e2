"""One phase of one job, the worker's shell over the goal machine: take the lease, load the saved state, call
``workflow.machine.advance`` once, save, queue the next phase.

Every rule of a goal's course is the machine's; here are only the lease, the heartbeat, the trace, giving a phase
back (an error of this worker's environment, or one worth trying again) and the job's end. What the ledger reads and
writes around the transition is ``worker.bookkeeping``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import redis
from celery.exceptions import SoftTimeLimitExceeded

from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError, WorkflowError
from orchestrator.logs import get_logger, mask_value
from orchestrator.tracing import emit_goal_span, tracer, under_goal
from orchestrator.worker.bookkeeping import (
    PhaseOutcome,
    failed,
    finish,
    job_settings,
    record_fields,
    saved_state,
    scripts_s,
)
from orchestrator.worker.containers import kill_job_containers
from orchestrator.worker.heartbeat import Heartbeat
from orchestrator.worker.leases import Acquire, LeaseLost
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.readiness import is_environment_error
from orchestrator.worker.records import JobRecord
from orchestrator.worker.tenancy import library_root, scenario_file
from orchestrator.worker.time_limits import SoftLimitReached, requeue_delay_s, soft_limit_interrupts
from orchestrator.workflow import phases
from orchestrator.workflow.goal import Checkpoint
from orchestrator.workflow.machine import advance
from orchestrator.workflow.phases import Phase
from orchestrator.workflow.request import check_job_id
from orchestrator.workflow.runtime import RuntimeSource, RuntimeSpec

log = get_logger("orchestrator.worker")


class Enqueue(Protocol):
    """Queue ``phase`` of the job (``countdown_s``: not before that many seconds from now)."""

    def __call__(self, record: JobRecord, phase: str, *, countdown_s: float = 0.0) -> None: ...


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
    stopping: Callable[[], bool] = lambda: False
    """This worker is stopping (SIGTERM, a warm shutdown): a running phase is handed back, not run to its end."""
    remove_containers: Callable[[Settings, str], int] = kill_job_containers
    """How the job's sandbox containers are removed (tests of the drivers, with no sandbox, give their own)."""

    def kill_containers(self, job_id: str) -> int:
        return self.remove_containers(self.settings, job_id)


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
    if record.job_id != check_job_id(job_id, where="ledger"):  # the record's own id field must be its key's
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
        with Heartbeat(pc.ledger, job_id, token, interval_s=w.heartbeat_s, lease_s=w.stale_after_s, interrupt=True,
                       stopping=pc.stopping):
            done = _run_traced(pc, record, phase, attempt)
    except GiveBack as e:
        return _give_back(pc, record, phase_token, token, entry, e)
    done.fields["timings"] = {**record.timings, **done.fields.get("timings", {}), phase_token: time.time() - started}
    try:
        pc.ledger.commit_phase(job_id, token, done.checkpoint, next=done.next, **done.fields)
    except LeaseLost:
        # Cancelled by its producer (the lease is still ours) or taken over by another worker: said as such.
        now = pc.ledger.get(job_id)
        lost = "cancelled" if now is not None and now.state == "cancelled" else "lease_lost"
        log.warning(f"phase.{lost}", job=job_id, phase=phase_token)
        pc.ledger.release(job_id, token)  # still ours when the job was cancelled: let a re-run start at once
        pc.ledger.add_history(job_id, {**entry, "end": time.time(), "outcome": lost})
        return lost
    pc.ledger.add_history(job_id, {**entry, "end": time.time(), "outcome": done.next})
    ended = done.next == phases.token(phases.Done())
    if not ended:
        pc.enqueue(pc.ledger.get(job_id) or record, done.next)
    pc.ledger.release(job_id, token)
    if ended:
        job_ended(pc, job_id)
    return "ok"


def _give_back(pc: PhaseContext, record: JobRecord, phase: str, token: str, entry: dict[str, Any], e: GiveBack) -> str:
    """The phase goes back to the queue (from its last saved state) for another attempt, after a backoff that grows
    with its attempts (``time_limits.requeue_delay_s``); the job fails only at the attempts cap. A worker whose own
    environment failed (model server, key, engine, image) stands by meanwhile."""
    pc.kill_containers(record.job_id)
    why = mask_value(f"worker {pc.worker} could not run {phase}: {e.error.message}")
    log.warning("phase.given_back", job=record.job_id, phase=phase, error=why)
    if isinstance(e, WorkerUnfit):
        pc.standby(why)
    outcome = pc.ledger.give_back(record.job_id, token, why=why, max_attempts=pc.settings.worker.max_attempts)
    delay_s = requeue_delay_s(pc.settings.worker, int(entry["attempt"])) if outcome == "queued" else 0.0
    waited = {"requeued_after_s": round(delay_s, 3)} if outcome == "queued" else {}
    pc.ledger.add_history(record.job_id, {**entry, "end": time.time(), "outcome": f"given_back:{outcome}",
                                          "reason": why, **waited})
    if outcome == "queued":
        pc.enqueue(pc.ledger.get(record.job_id) or record, phase, countdown_s=delay_s)
    elif outcome == "exhausted":
        job_ended(pc, record.job_id)
    return "given_back" if outcome == "queued" else outcome


def _run_traced(pc: PhaseContext, record: JobRecord, phase: Phase, attempt: int) -> PhaseOutcome:
    name = phases.token(phase)
    attrs: dict[str, Any] = {"orch.job_id": record.job_id, "orch.phase": name, "orch.attempt": attempt}
    saved: Checkpoint | None = None
    with _goal_context(record), tracer().start_as_current_span(phase.kind.value, attributes=attrs) as span:
        try:
            with soft_limit_interrupts():
                saved = saved_state(pc.settings, pc.ledger, record, phase)
                return _advance(pc, record, saved, phase, attempt)
        except (SoftLimitReached, SoftTimeLimitExceeded):
            killed = pc.kill_containers(record.job_id)
            if pc.stopping():  # a graceful stop: the next worker runs the phase again from the last saved state
                span.set_attribute("orch.error", "worker stopping")
                why = f"worker {pc.worker} was stopped during {name}; its sandbox containers were removed"
                del killed  # most went as the phase unwound; the rest just now
                raise GiveBack(WorkflowError(why, where=name, next_step="none: another worker runs it")) from None
            span.set_attribute("orch.error", "soft time limit")
            why = f"{name} ran past its soft time limit; {killed} sandbox container(s) of the job were killed"
            error = WorkflowError(why, where=name, next_step="raise the budgets")
            return failed(pc.settings, record, saved, error, name)
        except OrchestratorError as e:
            span.set_attribute("orch.error", e.message)
            if is_environment_error(e):
                raise WorkerUnfit(e) from e
            if e.retryable:
                raise Retryable(e) from e
            return failed(pc.settings, record, saved, e, name)
        except (redis.RedisError, GiveBack):
            raise  # the ledger is unreachable (the sweep retries once Redis is back), or this worker is unfit
        except Exception as e:  # a bug must end the job with its reason, not look like a dead worker three times
            log.exception("phase.crashed", job=record.job_id, phase=name)
            span.set_attribute("orch.error", repr(e))
            why = f"unexpected error in {name}: {type(e).__name__}: {e}"
            error = WorkflowError(why, where=name, next_step="report it with the logs")
            return failed(pc.settings, record, saved, error, name)


@contextmanager
def _goal_context(record: JobRecord) -> Iterator[None]:
    if record.trace_id and record.span_id:
        with under_goal(record.trace_id, record.span_id):
            yield
    else:
        yield


def _advance(pc: PhaseContext, record: JobRecord, saved: Checkpoint, phase: Phase, attempt: int) -> PhaseOutcome:
    """One transition of the goal machine, and what the ledger learns from it."""
    req = record.request
    settings = job_settings(pc.settings, req)
    scripts_before = scripts_s(saved.state)
    spec = RuntimeSpec(
        settings,
        library_root(settings, req.skills if req is not None else None),  # registered libraries only, checked again
        (req.model if req is not None else "") or settings.model.name,
        scenario_guard=lambda value: scenario_file(settings, value),  # never a file outside the scenario folders
        job_id=record.job_id,
        cursor=saved.model_cursor,
        on_event=lambda name, data: pc.on_event(name, {"job": record.job_id, **data}),
    )
    with pc.runtimes.open(spec) as rt:
        state, nxt = advance(saved.state, phase, rt)
        fields = record_fields(record, saved.state, state, phase, rt)
        cursor = rt.cursor(saved.model_cursor)
        unfit = next((e for e in rt.model_errors if is_environment_error(e)), None)
    if unfit is not None:  # the Act turned it into a failed step: it was this worker's model server
        raise WorkerUnfit(unfit)
    fields["timings"] = {
        "model": record.timings.get("model", 0.0) + rt.model_seconds,
        "scripts": record.timings.get("scripts", 0.0) + max(0.0, scripts_s(state) - scripts_before),
    }
    out = PhaseOutcome(Checkpoint(state=state, model_cursor=cursor), phases.token(nxt), fields)
    if isinstance(nxt, phases.Done):
        assert nxt.result is not None
        finish(pc.settings, record, out, nxt.result)
    return out


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


