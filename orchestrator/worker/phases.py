"""One phase of one job: acquire the lease, load the state, run the workflow phase, save, enqueue the next.

This is the body of every task, kept free of Celery so it reads as the job's state machine. The workflow
functions (``start_goal`` / ``plan_goal`` / ``act_step`` / ``reflect_replan`` / ``reflect_finish``) do the work;
everything here is bookkeeping: the ledger transitions written before and after the work, the heartbeat, the
trace, the clean-up. A Reflect that re-plans queues the new plan's first act instead of ending the job.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis
from celery.exceptions import SoftTimeLimitExceeded

from orchestrator.act.memo import MemoStore
from orchestrator.config import Settings
from orchestrator.errors import OrchestratorError, WorkflowError
from orchestrator.llm.factory import SCRIPTED_API_KEY, open_model, parse_model_spec
from orchestrator.llm.openai_client import OpenAIChatModel
from orchestrator.llm.scenario import load_scenario
from orchestrator.llm.scenario_server import start_scenario_server
from orchestrator.logs import get_logger, mask_value
from orchestrator.sandbox.docker import SandboxRunner
from orchestrator.skills.cache import ReadCache
from orchestrator.skills.loader import RUNTIME_WORK_DIRS, SkillLibrary
from orchestrator.skills.tree import tree_hash
from orchestrator.tracing import emit_goal_span, tracer, under_goal
from orchestrator.worker.blobs import BlobStore
from orchestrator.worker.heartbeat import Heartbeat
from orchestrator.worker.inputs import InputRef, materialise
from orchestrator.worker.ledger import JobRecord, LeaseLost, Ledger, SkillVersion
from orchestrator.worker.limits import SoftLimitReached, soft_limit_interrupts
from orchestrator.worker.readiness import is_environment_error
from orchestrator.worker.staging import StagedSandbox
from orchestrator.worker.submit import MB, BudgetOverrides
from orchestrator.worker.tenancy import (
    Refused,
    check_checkpoint,
    check_job_id,
    job_work_dir,
    library_root,
    own_out_dir,
    scenario_file,
)
from orchestrator.workflow.models import GoalError, GoalRequest, GoalResult, GoalState
from orchestrator.workflow.run import Runtime, act_step, plan_goal, reflect_finish, reflect_replan, start_goal

log = get_logger("orchestrator.worker")

Enqueue = Callable[[JobRecord, str], None]
EventSink = Callable[[str, dict[str, Any]], None]


class PhaseBusy(Exception):
    """Another worker holds the job's lease right now: try this task again shortly."""


class WorkerUnfit(Exception):
    """An error of this worker's own environment (readiness.is_environment_error): not the job's fault."""

    def __init__(self, error: OrchestratorError) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass
class PhaseContext:
    settings: Settings
    ledger: Ledger
    worker: str
    enqueue: Enqueue
    on_event: EventSink = lambda name, data: None
    kill_containers: Callable[[str], int] = lambda job_id: 0
    standby: Callable[[str], None] = lambda why: None
    """Stop this worker taking work until its readiness checks pass again."""


@dataclass
class _Outcome:
    checkpoint: dict[str, Any] | None
    next: str
    fields: dict[str, Any] = field(default_factory=dict)
    result: GoalResult | None = None


def run_phase(pc: PhaseContext, job_id: str, phase: str) -> str:
    """Run ``phase`` of ``job_id`` if it is the job's next phase; returns what happened (``ok``, ``stale``, …)."""
    w = pc.settings.worker
    outcome, token, attempt = pc.ledger.acquire(
        job_id, phase, worker=pc.worker, lease_s=w.stale_after_s, max_attempts=w.max_attempts
    )
    if outcome == "busy":
        raise PhaseBusy(job_id)
    if outcome == "exhausted":
        job_ended(pc, job_id)
    if outcome != "ok":
        log.info("phase.skipped", job=job_id, phase=phase, outcome=outcome)
        return outcome
    record = pc.ledger.get(job_id)
    assert record is not None
    if record.job_id != check_job_id(job_id):  # the record's own id field must be its key's
        record = record.model_copy(update={"job_id": job_id, "out": "\0altered"})
    if phase.startswith("act:"):
        index = int(phase.split(":")[1])
        skill = record.plan[index] if index < len(record.plan) else None
        pc.ledger.update(job_id, step=index, skill=skill)
        record = record.model_copy(update={"step": index, "skill": skill})
    if attempt > 1:
        pc.kill_containers(job_id)  # what an earlier attempt left behind
    started = time.time()
    entry = {"phase": phase, "worker": pc.worker, "attempt": attempt, "start": started}
    # A lease lost mid-phase (the job cancelled, or taken over) interrupts the phase: its work would be dropped.
    try:
        with Heartbeat(pc.ledger, job_id, token, interval_s=w.heartbeat_s, lease_s=w.stale_after_s, interrupt=True):
            done = _run_traced(pc, record, phase, attempt)
    except WorkerUnfit as e:
        return _give_back(pc, record, phase, token, entry, e.error)
    done.fields["timings"] = {**record.timings, **done.fields.get("timings", {}), phase: time.time() - started}
    try:
        pc.ledger.commit_phase(job_id, token, done.checkpoint, next=done.next, **done.fields)
    except LeaseLost:
        log.warning("phase.lease_lost", job=job_id, phase=phase)
        pc.ledger.release(job_id, token)  # still ours when the job was cancelled: let a re-run start at once
        pc.ledger.add_history(job_id, {**entry, "end": time.time(), "outcome": "lease_lost"})
        return "lease_lost"
    pc.ledger.add_history(job_id, {**entry, "end": time.time(), "outcome": done.next})
    if done.next != "end":
        pc.enqueue(pc.ledger.get(job_id) or record, done.next)
    pc.ledger.release(job_id, token)
    if done.next == "end":
        job_ended(pc, job_id)
    return "ok"


def _give_back(
    pc: PhaseContext, record: JobRecord, phase: str, token: str, entry: dict[str, Any], error: OrchestratorError
) -> str:
    """This worker cannot run phases (its model server, key, engine or image): the phase goes back to the queue
    for another worker and this one stands by; the job fails only at the attempts cap."""
    pc.kill_containers(record.job_id)
    why = mask_value(f"worker {pc.worker} could not run {phase}: {error.message}")
    log.warning("phase.given_back", job=record.job_id, phase=phase, error=why)
    pc.standby(why)
    outcome = pc.ledger.give_back(record.job_id, token, why=why, max_attempts=pc.settings.worker.max_attempts)
    pc.ledger.add_history(record.job_id, {**entry, "end": time.time(), "outcome": f"given_back:{outcome}",
                                          "reason": why})
    if outcome == "queued":
        pc.enqueue(pc.ledger.get(record.job_id) or record, phase)
    elif outcome == "exhausted":
        job_ended(pc, record.job_id)
    return "given_back" if outcome == "queued" else outcome


def _run_traced(pc: PhaseContext, record: JobRecord, phase: str, attempt: int) -> _Outcome:
    name = phase.split(":")[0]
    attrs: dict[str, Any] = {"orch.job_id": record.job_id, "orch.phase": phase, "orch.attempt": attempt}
    with _goal_context(record), tracer().start_as_current_span(name, attributes=attrs) as span:
        try:
            with soft_limit_interrupts():
                return _run(pc, record, phase, attempt)
        except (SoftLimitReached, SoftTimeLimitExceeded):
            killed = pc.kill_containers(record.job_id)
            span.set_attribute("orch.error", "soft time limit")
            why = f"{phase} ran past its soft time limit; {killed} sandbox container(s) of the job were killed"
            return _failed(pc, record, phase, WorkflowError(why, where=phase, next_step="raise the budgets"))
        except OrchestratorError as e:
            span.set_attribute("orch.error", e.message)
            if is_environment_error(e):
                raise WorkerUnfit(e) from e
            return _failed(pc, record, phase, e)
        except (redis.RedisError, WorkerUnfit):
            raise  # the ledger is unreachable (the sweep retries once Redis is back), or this worker is unfit
        except Exception as e:  # a bug must end the job with its reason, not look like a dead worker three times
            log.exception("phase.crashed", job=record.job_id, phase=phase)
            span.set_attribute("orch.error", repr(e))
            why = f"unexpected error in {phase}: {type(e).__name__}: {e}"
            return _failed(pc, record, phase, WorkflowError(why, where=phase, next_step="report it with the logs"))


@contextmanager
def _goal_context(record: JobRecord) -> Iterator[None]:
    if record.trace_id and record.span_id:
        with under_goal(record.trace_id, record.span_id):
            yield
    else:
        yield


def _run(pc: PhaseContext, record: JobRecord, phase: str, attempt: int) -> _Outcome:
    req = record.request
    settings = job_settings(pc.settings, req)  # budgets within the ceilings, or the job fails here
    checkpoint = pc.ledger.load_checkpoint(record.job_id) if phase != "plan" else None
    if phase == "plan":
        request = GoalRequest(
            goal=record.goal,
            inputs=_received_inputs(pc, record),
            constraints=req.get("constraints", []),
            job_id=record.job_id,
        )
        out_dir = job_out_dir(pc.settings, record)
        claim_output(pc.settings, out_dir, record)
        state = start_goal(request, out_dir, settings)
        _write_owner(pc.settings, out_dir, record)
        cursor = 0
    else:
        if checkpoint is None:
            raise Refused(f"no saved state for {record.job_id} before {phase}", where="checkpoint")
        state = GoalState.model_validate(checkpoint["state"])
        check_checkpoint(state, record.job_id, pc.settings)  # what Redis says is input too
        cursor = int(checkpoint.get("model_cursor", 0))
    scripts_before = _scripts_s(state)
    with _runtime(settings, req, cursor, pc, record, (phase, attempt)) as (rt, timer):
        if phase == "plan":
            plan_goal(state, rt)
            assert state.plan is not None
            chosen = [s.skill for s in state.plan.steps]
            fields: dict[str, Any] = {
                "steps_total": len(chosen),
                "plan": chosen,
                "skills": {
                    "available": [v.model_dump() for v in _versions(rt.library, [s.id for s in rt.library.list()])],
                    "chosen": [v.model_dump() for v in _versions(rt.library, chosen)],
                    "loaded": [],
                },
            }
            nxt = "act:0" if chosen else "reflect"  # no step: no skill fits, Reflect ends it unmet
            result = None
        elif phase.startswith("act:"):
            index = int(phase.split(":")[1])
            assert state.plan is not None
            act_step(state, index, rt)
            act = state.results[index]
            skills = dict(record.skills.model_dump())
            loaded = [v for v in skills["loaded"] if v["id"] != act.skill_id]
            skills["loaded"] = loaded + [v.model_dump() for v in _versions(rt.library, [act.skill_id])]
            fields = {"step": index, "skill": act.skill_id, "skills": skills}
            more = index + 1 < len(state.plan.steps) and act.status != "failed"
            nxt = f"act:{index + 1}" if more else "reflect"
            result = None
        else:
            assert state.plan is not None
            start = reflect_replan(state, rt) if state.plan.steps else None
            if start is None:
                result = reflect_finish(state, rt)
                fields = {}
                nxt = "end"
            else:  # a re-plan: its steps run as act phases again, then Reflect once more
                chosen = [s.skill for s in state.plan.steps]
                skills = dict(record.skills.model_dump())
                skills["chosen"] = [v.model_dump() for v in _versions(rt.library, chosen)]
                fields = {"plan": chosen, "steps_total": len(chosen), "skills": skills}
                nxt = f"act:{start}"
                result = None
        fields["timings"] = {
            "model": record.timings.get("model", 0.0) + timer.model_s,
            "scripts": record.timings.get("scripts", 0.0) + max(0.0, _scripts_s(state) - scripts_before),
        }
        new_cursor = rt_model_cursor(rt, cursor)
        if timer.unfit is not None:  # the Act turned it into a failed step: it was this worker's model server
            raise WorkerUnfit(timer.unfit)
    out = _Outcome({"state": state.model_dump(mode="json"), "model_cursor": new_cursor}, nxt, fields, result)
    if result is not None:
        _finish(pc, record, out, result)
    return out


def _received_inputs(pc: PhaseContext, record: JobRecord) -> list[Path]:
    """The job's input files, written from their blobs in Redis into the job's own folder (never a named path)."""
    refs = [InputRef.model_validate(item) for item in record.request.get("inputs") or []]
    caps = pc.settings.job_inputs
    store = BlobStore(pc.ledger.r, max_bytes=int(caps.file_max_mb * MB), ttl_s=caps.ttl_s)
    return materialise(refs, store, job_work_dir(pc.settings, record.job_id) / "received")


def _finish(pc: PhaseContext, record: JobRecord, out: _Outcome, result: GoalResult) -> None:
    result.metrics.duration_ms = int((time.time() - (record.started_at or record.submitted_at)) * 1000)
    result.evidence_path = _save_evidence(result, evidence_dir(pc.settings, record))
    data = mask_value(result.model_dump(mode="json", by_alias=True))
    out.fields.update(
        state=result.status,
        result=data,
        artifacts=data.get("artifacts", []),
        finished_at=time.time(),
        reason=(data.get("error") or {}).get("message"),  # masked, like the rest of what the ledger keeps
    )


def _failed(pc: PhaseContext, record: JobRecord, phase: str, e: OrchestratorError) -> _Outcome:
    """A phase that raised: the job ends ``failed`` saying where and why (partial artifacts stay in place)."""
    log.warning("phase.failed", job=record.job_id, phase=phase, error=e.message)
    result = GoalResult(
        job_id=record.job_id,
        goal=record.goal,
        status="failed",
        out_dir=str(pc.settings.output_root / record.job_id),
        error=GoalError(
            where=e.where or phase, message=e.message, next_step=e.next_step or "", code=e.code and e.code.value
        ),
    )
    out = _Outcome(None, "end")
    _finish(pc, record, out, result)
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


def mark_cancelled(pc: PhaseContext, job_id: str) -> None:
    """A cancelled job's files stay where they are, listed in the ledger and its evidence as partial."""
    record = pc.ledger.get(job_id)
    if record is None or record.state != "cancelled" or record.result is not None:
        return
    folder = job_out_dir(pc.settings, record)
    artifacts = [
        {"path": p.relative_to(folder).as_posix(), "size": p.stat().st_size, "sha256": _file_hash(p), "partial": True}
        for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()
    ] if folder.is_dir() else []
    result: dict[str, Any] = {
        "job_id": job_id,
        "goal": record.goal,
        "status": "cancelled",
        "artifacts": artifacts,
        "out_dir": str(folder),
        "error": {"where": "cancel", "message": record.reason or "cancelled", "next_step": "jobs ID --rerun"},
    }
    target = evidence_dir(pc.settings, record)
    result["evidence_path"] = _write_private(target, json.dumps(mask_value(result), indent=2))
    pc.ledger.update(job_id, result=mask_value(result), artifacts=artifacts)


def _file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


OWNERS_DIR = ".orchestrator/owners"
"""Under the output root: which ledger and job own each job folder (``<out>.json``), so two stacks sharing an
output root never write into each other's folders. Kept beside the folders, not in them: those hold only results."""


def _owner_file(settings: Settings, folder: Path) -> Path:
    root = settings.output_root.resolve()
    return root / OWNERS_DIR / f"{folder.relative_to(root).as_posix()}.json"


def claim_output(settings: Settings, folder: Path, record: JobRecord) -> None:
    """Refuse an output folder that a job of another ledger wrote (same job id or ``out``, another stack)."""
    try:
        owner = json.loads(_owner_file(settings, folder).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    theirs = str(owner.get("ledger", "")) if isinstance(owner, dict) else ""
    if theirs and theirs != (record.stack or "local"):
        raise WorkflowError(
            f"output folder {folder} belongs to job {owner.get('job_id')!r} of another ledger ({theirs}); "
            f"this ledger is {record.stack or 'local'}",
            where="output",
            next_step="give each stack its own output root (ORCH_OUTPUT_ROOT), or another job id or out",
        )


def _write_owner(settings: Settings, folder: Path, record: JobRecord) -> None:
    path = _owner_file(settings, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"ledger": record.stack or "local", "job_id": record.job_id}), encoding="utf-8")


def job_settings(settings: Settings, request: dict[str, Any]) -> Settings:
    """The deployment's settings with the goal line's budgets applied, checked again against the ceilings."""
    budgets = BudgetOverrides.model_validate(request.get("budgets") or {})
    if problems := budgets.over_ceilings(settings):
        raise Refused("budgets: " + "; ".join(problems), where="budgets", next_step="submit within the ceilings")
    limits = budgets.applied_to(settings.limits)
    return settings.model_copy(update={"limits": limits})


def job_out_dir(settings: Settings, record: JobRecord) -> Path:
    """``<output root>/<job id>``, checked again here: the ledger is input too."""
    return own_out_dir(settings, record.job_id, record.out)


class _Timer:
    """Wall time inside model calls during one phase (with script time, what is not orchestration overhead)."""

    def __init__(self) -> None:
        self.model_s = 0.0
        self.unfit: OrchestratorError | None = None
        """A model error of this worker's environment (server unreachable, key rejected) met during the phase."""


def _scripts_s(state: GoalState) -> float:
    return float(
        sum((rec.container or {}).get("elapsed_ms", 0) / 1000 for r in state.results for rec in r.evidence_summary)
    )


class _TimedModel:
    """A ``ChatModel`` that adds each call's wall time to a timer and traces it as a ``model`` span."""

    def __init__(self, model: Any, timer: _Timer) -> None:
        self._model = model
        self._timer = timer
        self.name = model.name

    def complete(self, messages: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        with tracer().start_as_current_span("model", attributes={"orch.purpose": str(kwargs.get("purpose", ""))}):
            try:
                return self._model.complete(messages, **kwargs)
            except OrchestratorError as e:
                if is_environment_error(e):
                    self._timer.unfit = e
                raise
            finally:
                self._timer.model_s += time.perf_counter() - started


@contextmanager
def _runtime(
    settings: Settings,
    req: dict[str, Any],
    cursor: int,
    pc: PhaseContext,
    record: JobRecord,
    phase: tuple[str, int],
) -> Iterator[tuple[Any, _Timer]]:
    skills = library_root(settings, req.get("skills"))  # registered libraries only, checked again here
    spec = req.get("model") or settings.model.name
    library = SkillLibrary(
        skills, l2_max_tokens=settings.disclosure.l2_max_tokens, cache=ReadCache(), work_dirs=RUNTIME_WORK_DIRS
    )
    sandbox = _sandbox(settings)
    timer = _Timer()
    kind, value = parse_model_spec(spec)
    with _model(kind, value, spec, settings, cursor, record.job_id, phase) as (model, server):
        rt = Runtime(
            settings=settings,
            model=_TimedModel(model, timer),
            library=library,
            sandbox=sandbox,
            store=MemoStore(settings.cache_dir / "store"),
            on_event=lambda name, data: pc.on_event(name, {"job": record.job_id, **data}),
        )
        rt._scripted_server = server  # type: ignore[attr-defined]
        yield rt, timer


_SANDBOXES: dict[tuple[int, str], StagedSandbox] = {}


def _sandbox(settings: Settings) -> StagedSandbox:
    """One sandbox runner per worker process (and sandbox settings), reused by every phase; it connects to the
    Docker engine on first use and its jobs start containers only when a script runs."""
    # By value, as JSON: the sandbox settings hold dicts (limit profiles), so the model itself is not hashable.
    key = (os.getpid(), settings.sandbox.model_dump_json())
    if key not in _SANDBOXES:
        _SANDBOXES[key] = StagedSandbox(SandboxRunner(settings.sandbox))
    return _SANDBOXES[key]


_MODELS: dict[tuple[Any, ...], tuple[Any, Any]] = {}
_MAX_MODELS = 8


@contextmanager
def _model(
    kind: str, value: str, spec: str, settings: Settings, cursor: int, job_id: str, phase: tuple[str, int]
) -> Iterator[tuple[Any, Any]]:
    """The job's model, kept per worker process and thread: building an HTTP client costs more than a phase's
    bookkeeping. A scripted model's server is rewound to where this goal's scenario stands."""
    if kind != "scripted":
        # The job id goes along with every request, so a model server shared by many goals (the compose stack's
        # scripted-llm, a gateway) can tell their conversations apart.
        # With the phase and its attempt, such a server can also play a phase retried after a takeover again.
        with open_model(spec, settings.model, job_id=job_id, phase=phase) as model:
            yield model, None
        return
    value = str(scenario_file(settings, value))  # never a file outside the scenario folders
    stamp = Path(value).stat().st_mtime_ns
    # by value, as JSON: the model settings hold dicts (profiles), so the model itself is not hashable
    key = (os.getpid(), threading.get_ident(), spec, settings.model.model_dump_json(), stamp)
    entry = _MODELS.get(key)
    if entry is None:
        server = start_scenario_server(load_scenario(Path(value)))
        model = OpenAIChatModel(
            server.model_name, settings.model, api_key=SCRIPTED_API_KEY, base_url=server.base_url, name=spec
        )
        entry = (model, server)
        while len(_MODELS) >= _MAX_MODELS:
            _close(_MODELS.pop(next(iter(_MODELS))))
        _MODELS[key] = entry
    model, server = entry
    if server is not None:
        server.restart_at(cursor)
    try:
        yield model, server
    except BaseException:
        _close(_MODELS.pop(key, entry))  # a model that broke mid-phase is not reused
        raise


def _close(entry: tuple[Any, Any]) -> None:
    model, server = entry
    with contextlib.suppress(Exception):
        model.close()
    if server is not None:
        server.close()


def rt_model_cursor(rt: Any, cursor: int) -> int:
    """Where the next phase's scripted model continues its scenario (unchanged for a real model)."""
    server = getattr(rt, "_scripted_server", None)
    return cursor if server is None else int(server.steps_used)


def _versions(library: Any, skill_ids: list[str]) -> list[SkillVersion]:
    out = []
    for skill_id in dict.fromkeys(skill_ids):
        try:
            folder = library.resolve(skill_id, "SKILL.md").parent
        except OrchestratorError:
            continue
        out.append(SkillVersion(id=skill_id, sha256=tree_hash(folder)))  # the identity stored work is keyed by
    return out


def evidence_dir(settings: Settings, record: JobRecord) -> Path:
    """``<cache>/jobs/<stack>/<job id>/run-<n>``: a re-run keeps the earlier runs' evidence, and two ledgers sharing
    a cache folder never write over each other's."""
    return settings.cache_dir / "jobs" / (record.stack or "local") / record.job_id / f"run-{record.run}"


def _save_evidence(result: GoalResult, folder: Path) -> str:
    """The masked evidence file, as ``run`` writes it: folder ``0700``, file ``0600`` (written whole, then renamed)."""
    return _write_private(folder, json.dumps(mask_value(result.model_dump(mode="json", by_alias=True)), indent=2))


def _write_private(folder: Path, text: str) -> str:
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    folder.chmod(0o700)
    path = folder / "result.json"
    fd, temp = tempfile.mkstemp(dir=folder, prefix=".result-", suffix=".part")  # created 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return str(path)
