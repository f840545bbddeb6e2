"""The Celery tasks: thin shells over ``phases.run_phase`` (plan, one act per plan step, reflect).

A task never waits on another: each phase enqueues the next one when it has saved its state. The decisions (run,
skip a finished phase, wait for a lease, take over a dead worker's job) are the ledger's.
"""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import redis
from celery import Task
from celery.signals import setup_logging, worker_process_init, worker_ready, worker_shutdown

from orchestrator.config import Settings
from orchestrator.logs import configure_logging, get_logger
from orchestrator.sandbox.engine import connect
from orchestrator.sandbox.reaper import remove_job_resources
from orchestrator.tracing import configure_tracing
from orchestrator.worker.celery_app import app
from orchestrator.worker.dispatch import send_phase
from orchestrator.worker.heartbeat import Sweeper
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.phases import PhaseBusy, PhaseContext, job_ended, run_phase

log = get_logger("orchestrator.worker")
BUSY_RETRY_S = 2.0
_RESERVED_EVENT_FIELDS = frozenset(
    {"event", "state", "type", "timestamp", "name", "args", "kwargs", "uuid", "hostname", "result", "info", "id"}
)
_process: dict[str, Any] = {}
_process_lock = threading.Lock()


def settings_of(celery_app: Any) -> Settings:
    settings: Settings = celery_app.conf.orch_settings
    return settings


def kill_job_containers(settings: Settings, job_id: str) -> int:
    """Remove the job's sandbox containers (0 when no Docker engine is reachable from this worker)."""
    try:
        client = connect(timeout_s=30)
        try:
            return remove_job_resources(client, settings.sandbox.label_prefix, job_id)
        finally:
            client.close()
    except Exception as e:  # noqa: BLE001 - clean-up is best effort; the reaper catches what is left
        log.warning("worker.kill_containers_failed", job=job_id, error=str(e))
        return 0


def _ledger() -> Ledger:
    with _process_lock:
        key = f"ledger:{os.getpid()}"
        if key not in _process:
            settings = settings_of(app)
            _process[key] = Ledger.from_url(settings.broker_url, outage_s=settings.worker.redis_outage_s)
        ledger: Ledger = _process[key]
        return ledger


def _context(task: Task) -> PhaseContext:
    settings = settings_of(app)
    ledger = _ledger()

    def on_event(name: str, data: dict[str, Any]) -> None:
        # Flower merges event fields into its task object: keep clear of the names it uses itself.
        fields = {(f"orch_{k}" if k in _RESERVED_EVENT_FIELDS else k): v for k, v in data.items()}
        try:
            task.send_event("task-progress", progress=name, **fields)
        except Exception as e:  # noqa: BLE001 - an event for Flower is not worth a goal (Redis may be restarting)
            log.warning("worker.event_lost", job=data.get("job"), progress=name, error=str(e))

    return PhaseContext(
        settings=settings,
        ledger=ledger,
        worker=f"{task.request.hostname or socket.gethostname()}:{os.getpid()}",
        enqueue=lambda record, phase: send_phase(app, settings, record, phase),
        on_event=on_event,
        kill_containers=lambda job_id: kill_job_containers(settings, job_id),
    )


def _phase(task: Task, job_id: str, phase: str) -> dict[str, str]:
    try:
        outcome = run_phase(_context(task), job_id, phase)
    except PhaseBusy as e:
        raise task.retry(countdown=BUSY_RETRY_S, max_retries=None) from e
    except redis.RedisError as e:
        # Redis went away mid-phase (a restart): send the task again rather than lose it. If the phase had
        # started, the ledger's lease makes the copy wait (or the sweep takes the job over); if it had finished,
        # the copy finds the phase done and does nothing.
        log.warning("phase.redis_error", job=job_id, phase=phase, error=str(e))
        raise task.retry(countdown=BUSY_RETRY_S, max_retries=None) from e
    return {"job_id": job_id, "phase": phase, "outcome": outcome}


@app.task(name="orchestrator.plan", bind=True)
def plan_task(self: Task, job_id: str) -> dict[str, str]:
    """Choose the skills for the goal (the L1 catalog), then queue the first act."""
    return _phase(self, job_id, "plan")


@app.task(name="orchestrator.act", bind=True)
def act_task(self: Task, job_id: str, step: int) -> dict[str, str]:
    """Run one plan step's skill; queue the next step, or reflect after the last."""
    return _phase(self, job_id, f"act:{step}")


@app.task(name="orchestrator.reflect", bind=True)
def reflect_task(self: Task, job_id: str) -> dict[str, str]:
    """Retry unmet steps once; queue a re-plan's steps (then Reflect again), or validate and judge: the job ends."""
    return _phase(self, job_id, "reflect")


# -- process set-up -------------------------------------------------------------------------------------------


@setup_logging.connect
def _setup_logging(**_: Any) -> None:
    settings = settings_of(app)
    configure_logging(settings.log_level, json=settings.log_json)


def _span_sink(trace_id: str, span: dict[str, Any]) -> None:
    _ledger().add_span(trace_id, span)


@worker_process_init.connect
def _init_process(**_: Any) -> None:
    configure_tracing("orchestrator-worker", _span_sink)


@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    settings = settings_of(app)
    configure_tracing("orchestrator-worker", _span_sink)
    ledger = Ledger.from_url(settings.broker_url, outage_s=settings.worker.redis_outage_s)
    name = getattr(sender, "hostname", None) or socket.gethostname()

    def requeue(job_id: str, phase: str) -> None:
        record = ledger.get(job_id)
        if record is not None:
            send_phase(app, settings, record, phase)

    def on_failed(job_id: str) -> None:
        job_ended(PhaseContext(settings=settings, ledger=ledger, worker=name, enqueue=lambda r, p: None), job_id)

    _process["sweeper"] = Sweeper(
        ledger,
        settings.worker,
        name=f"{name}:{os.getpid()}",
        requeue=requeue,
        kill_containers=lambda job_id: kill_job_containers(settings, job_id),
        on_failed=on_failed,
    ).start()


@worker_shutdown.connect
def _stop_sweeper(**_: Any) -> None:
    sweeper = _process.pop("sweeper", None)
    if sweeper is not None:
        sweeper.stop()
