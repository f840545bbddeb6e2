"""The Celery tasks: thin shells over ``phases.run_phase`` (plan, one act per plan step, reflect).

A task never waits on another: each phase enqueues the next one when it has saved its state. The decisions (run,
skip a finished phase, wait for a lease, take over a dead worker's job) are the ledger's.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from typing import Any

import redis
from celery import Task, bootsteps
from celery.signals import setup_logging, worker_process_init, worker_ready, worker_shutdown, worker_shutting_down

from orchestrator.config import Settings
from orchestrator.logs import configure_logging, get_logger, mask_secrets
from orchestrator.tracing import configure_tracing
from orchestrator.worker.celery_app import app
from orchestrator.worker.containers import kill_job_containers
from orchestrator.worker.dispatch import enqueue_phase
from orchestrator.worker.export import export_files
from orchestrator.worker.heartbeat import Sweeper
from orchestrator.worker.jobfiles import mark_cancelled
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.names import QUEUE
from orchestrator.worker.phases import PhaseBusy, PhaseContext, job_ended, run_phase
from orchestrator.worker.readiness import missing
from orchestrator.worker.records import TERMINAL
from orchestrator.worker.time_limits import requeue_delay_s
from orchestrator.workflow import phases
from orchestrator.workflow.runtime import Runtimes

log = get_logger("orchestrator.worker")
BUSY_RETRY_S = 2.0
_RESERVED_EVENT_FIELDS = frozenset(
    {"event", "state", "type", "timestamp", "name", "args", "kwargs", "uuid", "hostname", "result", "info", "id"}
)
_process: dict[str, Any] = {}
_process_lock = threading.Lock()
MAX_PROGRESS_SHOWN = 40
RECHECK_PREFIX = "orch:recheck:"
STOPPING_PREFIX = "orch:stopping:"
"""Set by a worker's main process when it is told to stop: its running phases hand themselves back."""


class JobFailed(Exception):
    """The phase ended its job ``failed``: raised so Celery (and Flower) record the task as a ``FAILURE`` whose
    error is the job's reason, instead of a success."""


class JobCancelled(Exception):
    """The job was cancelled (this phase was stopped, or found the job cancelled): raised so Celery (and Flower)
    record the task as a ``FAILURE`` saying ``cancelled`` with the reason, never as a success."""


def settings_of(celery_app: Any) -> Settings:
    settings: Settings = celery_app.conf.orch_settings
    return settings


def _runtimes() -> Runtimes:
    """This process's runtime factory (made after the fork: it holds threads and sockets)."""
    with _process_lock:
        key = f"runtimes:{os.getpid()}"
        if key not in _process:
            _process[key] = Runtimes(keep_models=True)
        runtimes: Runtimes = _process[key]
        return runtimes


def _ledger() -> Ledger:
    with _process_lock:
        key = f"ledger:{os.getpid()}"
        if key not in _process:
            settings = settings_of(app)
            _process[key] = Ledger.from_url(settings.broker_url, outage_s=settings.worker.redis_outage_s)
        ledger: Ledger = _process[key]
        return ledger


def _context(task: Task, progress: list[str]) -> PhaseContext:
    settings = settings_of(app)
    ledger = _ledger()

    def on_event(name: str, data: dict[str, Any]) -> None:
        # Flower shows custom events only as a passing state: the phase's result lists them too (the task's page).
        if len(progress) < MAX_PROGRESS_SHOWN:
            progress.append(_progress_line(name, data))
        # Flower merges event fields into its task object: keep clear of the names it uses itself.
        fields = {(f"orch_{k}" if k in _RESERVED_EVENT_FIELDS else k): v for k, v in data.items()}
        try:
            task.send_event("task-progress", progress=name, **fields)
        except Exception as e:  # noqa: BLE001 - an event for Flower is not worth a goal (Redis may be restarting)
            log.warning("worker.event_lost", job=data.get("job"), progress=name, error=str(e))

    # Read here: the heartbeat thread that asks is not the task's (Celery's task.request is per thread).
    stopping_key = f"{STOPPING_PREFIX}{task.request.hostname or socket.gethostname()}"
    return PhaseContext(
        settings=settings,
        ledger=ledger,
        worker=f"{task.request.hostname or socket.gethostname()}:{os.getpid()}",
        enqueue=lambda record, phase, countdown_s=0.0: enqueue_phase(app, settings, ledger, record, phase,
                                                                    countdown_s=countdown_s),
        runtimes=_runtimes(),
        on_event=on_event,
        standby=lambda why: go_standby(task.request.hostname or socket.gethostname(), ledger, why),
        stopping=lambda: bool(ledger.r.exists(stopping_key)),
    )


def _progress_line(name: str, data: dict[str, Any]) -> str:
    shown = " ".join(f"{k}={str(v)[:120]}" for k, v in data.items() if k not in ("job", "goal"))
    return mask_secrets(f"{name} {shown}".strip())


def _phase(task: Task, job_id: str, phase: str) -> dict[str, Any]:
    ledger = _ledger()
    before = ledger.get(job_id)
    progress: list[str] = []
    try:
        outcome = run_phase(_context(task, progress), job_id, phase)
    except PhaseBusy as e:
        raise task.retry(countdown=BUSY_RETRY_S, max_retries=None) from e
    except redis.RedisError as e:
        # Redis went away mid-phase (a restart): send the task again rather than lose it. If the phase had
        # started, the ledger's lease makes the copy wait (or the sweep takes the job over); if it had finished,
        # the copy finds the phase done and does nothing.
        log.warning("phase.redis_error", job=job_id, phase=phase, error=str(e))
        raise task.retry(countdown=BUSY_RETRY_S, max_retries=None) from e
    result: dict[str, Any] = {"job_id": job_id, "phase": phase, "outcome": outcome, "progress": progress}
    after = ledger.get(job_id)
    if after is not None and after.state == "cancelled":
        if after.result is None:
            mark_cancelled(settings_of(app), ledger, job_id)
        raise JobCancelled(f"job {job_id} cancelled during {phase} ({outcome}): {after.reason or 'no reason recorded'}")
    ended_here = (
        outcome in ("ok", "exhausted")
        and after is not None
        and after.state in TERMINAL
        and (before is None or before.state not in TERMINAL)
    )
    if ended_here and after is not None:
        if after.state == "failed":
            raise JobFailed(f"job {job_id} failed: {after.reason or 'no reason recorded'}")
        result["job_state"] = after.state  # done, unmet or cancelled: the last phase says how the job ended
        if after.state == "unmet":
            result["unmet"] = list((after.result or {}).get("unmet") or [])[:20]
    return result


@app.task(name="orchestrator.plan", bind=True, throws=(JobFailed, JobCancelled))
def plan_task(self: Task, job_id: str, step: int | None = None) -> dict[str, Any]:
    """Choose the skills for the goal (the L1 catalog), then queue the first act; with ``step``, the re-plan
    Reflect asked for: a new plan from that step on, then queue its first act (or Reflect, when none came)."""
    return _phase(self, job_id, phases.token(phases.Plan(step)))


@app.task(name="orchestrator.act", bind=True, throws=(JobFailed, JobCancelled))
def act_task(self: Task, job_id: str, step: int) -> dict[str, Any]:
    """Run one plan step's skill (or retry it, when Reflect asked); queue the next step, or reflect."""
    return _phase(self, job_id, phases.token(phases.Act(step)))


@app.task(name="orchestrator.reflect", bind=True, throws=(JobFailed, JobCancelled))
def reflect_task(self: Task, job_id: str) -> dict[str, Any]:
    """Queue a retry of an unmet step (an act) or a re-plan (a plan), or validate and judge: the job ends."""
    return _phase(self, job_id, phases.token(phases.Reflect()))


@app.task(name="orchestrator.export", bind=True)
def export_task(self: Task, job_id: str) -> dict[str, Any]:
    """Put a job's output files into Redis for ``jobs ID --download`` (any worker: the output root is shared)."""
    record = _ledger().get(job_id)
    if record is None:
        return {"files": [], "skipped": [{"path": ".", "reason": f"no job {job_id!r} in the ledger"}]}
    return export_files(_ledger().r, settings_of(app), record)


# -- process set-up -------------------------------------------------------------------------------------------


@setup_logging.connect
def _setup_logging(**_: Any) -> None:
    settings = settings_of(app)
    configure_logging(settings.log_level, json=settings.log_json)
    logging.getLogger(CELERY_WORKER_LOGGER).addFilter(READY_HELD)


class HoldReady(logging.Filter):
    """Celery logs ``HOST ready.`` as soon as it consumes its first queue, the standby one: held back until this
    worker's own checks pass (``WorkerWatch``), which then says it."""

    def __init__(self) -> None:
        super().__init__()
        self.released = False

    def filter(self, record: logging.LogRecord) -> bool:
        return self.released or record.msg != CELERY_READY_MESSAGE


CELERY_WORKER_LOGGER = "celery.apps.worker"
CELERY_READY_MESSAGE = "%s ready."
READY_HELD = HoldReady()


def _span_sink(trace_id: str, span: dict[str, Any]) -> None:
    _ledger().add_span(trace_id, span)


@worker_process_init.connect
def _init_process(**_: Any) -> None:
    configure_tracing("orchestrator-worker", _span_sink)


class WorkerWatch:
    """In the worker's main process: consume the orchestrator queue only while ready (readiness.py), and say in
    the ledger every ``worker.ready_check_s`` that this worker is alive, which queue it consumes, what it lacks."""

    def __init__(self, ledger: Ledger, settings: Settings, hostname: str) -> None:
        self._ledger = ledger
        self._settings = settings
        self._hostname = hostname
        self._stop = threading.Event()
        self.ready = False
        self.problems: list[str] = []
        self._standby_until = 0.0
        self._standby_why = ""
        self._thread = threading.Thread(target=self._run, name="worker-watch", daemon=True)

    def start(self) -> WorkerWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        with contextlib.suppress(Exception):
            self._ledger.withdraw_worker(self._hostname)

    def _run(self) -> None:
        every = self._settings.worker.ready_check_s
        while True:
            try:
                self.check_once()
            except Exception as e:  # noqa: BLE001 - Redis may be restarting: try again next round
                log.warning("worker.watch_failed", error=str(e))
            if self._stop.wait(every):
                return

    def check_once(self) -> None:
        recheck = self._ledger.r.getdel(f"{RECHECK_PREFIX}{self._hostname}")
        if recheck is not None:
            self.ready = False
            self._standby_why = recheck.decode(errors="replace") if isinstance(recheck, bytes) else str(recheck)
            self._standby_until = time.time() + self._settings.worker.standby_s
            log.warning("worker.standby", worker=self._hostname, why=self._standby_why,
                        seconds=self._settings.worker.standby_s)
        if not self.ready and time.time() < self._standby_until:
            until = time.strftime("%H:%M:%S", time.localtime(self._standby_until))
            self.problems = [f"standing by until {until} after: {self._standby_why}"]
        elif not self.ready:
            self.problems = missing(self._settings)
            if self.problems:
                log.warning("worker.not_ready", worker=self._hostname, missing=self.problems)
            else:
                # With a reply: a broadcast sent before the worker's mailbox listens is lost, and then this worker
                # would be announced ready without consuming. No reply: try again next round.
                replies = app.control.add_consumer(QUEUE, destination=[self._hostname], reply=True, timeout=5.0)
                self.ready = bool(replies)
                self.problems = [] if self.ready else ["starting: the worker did not confirm consuming the queue"]
                if self.ready:
                    log.info("worker.ready", worker=self._hostname, queue=QUEUE)
                    READY_HELD.released = True
                    logging.getLogger(CELERY_WORKER_LOGGER).info(CELERY_READY_MESSAGE, self._hostname)
        ttl = 3 * self._settings.worker.ready_check_s + 5
        info = {"ready": self.ready, "missing": self.problems, "queues": [QUEUE] if self.ready else []}
        self._ledger.announce_worker(self._hostname, info, ttl_s=ttl)


class ReadinessInStats(bootsteps.StartStopStep):  # type: ignore[misc]  # celery ships no types
    """Puts this worker's readiness into ``celery inspect stats``: Flower shows it on the worker's page (its *Other*
    tab) and in ``/api/workers``, where a worker that is up but not ready would otherwise look like any other."""

    name = "orchestrator readiness"

    def info(self, worker: Any) -> dict[str, Any]:
        return readiness_stats(_process.get("watch"))


def readiness_stats(watch: WorkerWatch | None) -> dict[str, Any]:
    """``orchestrator_readiness``: ``ready`` or ``not ready: REASON; ...`` (one line a person reads), and the
    reasons as a list in ``orchestrator_missing``."""
    if watch is None:
        problems = ["starting: readiness not checked yet"]
    elif watch.ready:
        return {"orchestrator_readiness": "ready", "orchestrator_missing": []}
    else:
        problems = list(watch.problems) or ["starting: readiness not checked yet"]
    return {"orchestrator_readiness": "not ready: " + "; ".join(problems), "orchestrator_missing": problems}


app.steps["worker"].add(ReadinessInStats)


def go_standby(hostname: str, ledger: Ledger, why: str) -> None:
    """Stop this worker consuming until its watch finds it ready again (called from a pool process)."""
    with contextlib.suppress(Exception):  # waits for the reply: the consumer stops before this task is acked
        app.control.cancel_consumer(QUEUE, destination=[hostname], reply=True, timeout=2.0)
    ledger.r.set(f"{RECHECK_PREFIX}{hostname}", why, ex=600)


@worker_ready.connect
def _start_watch(sender: Any = None, **_: Any) -> None:
    settings = settings_of(app)
    hostname = getattr(sender, "hostname", None) or socket.gethostname()
    ledger = Ledger.from_url(settings.broker_url, outage_s=settings.worker.redis_outage_s)
    ledger.r.delete(f"{STOPPING_PREFIX}{hostname}")  # a worker started again under the name of one that stopped
    consuming = [q.name for q in getattr(getattr(sender, "task_consumer", None), "queues", []) or []]
    if QUEUE in consuming:  # started by `celery worker` with our queue: hold it back until ready
        app.control.cancel_consumer(QUEUE, destination=[hostname])
    _process["watch"] = WorkerWatch(ledger, settings, hostname).start()


@worker_ready.connect
def _start_sweeper(sender: Any = None, **_: Any) -> None:
    settings = settings_of(app)
    configure_tracing("orchestrator-worker", _span_sink)
    ledger = Ledger.from_url(settings.broker_url, outage_s=settings.worker.redis_outage_s)
    name = getattr(sender, "hostname", None) or socket.gethostname()

    def requeue(job_id: str, phase: str, attempts: int) -> None:
        record = ledger.get(job_id)
        if record is not None:  # after a backoff, as a phase handed back is
            delay_s = requeue_delay_s(settings.worker, max(1, attempts - 1))
            enqueue_phase(app, settings, ledger, record, phase, countdown_s=delay_s)

    def on_failed(job_id: str) -> None:
        context = PhaseContext(settings=settings, ledger=ledger, worker=name,
                               enqueue=lambda r, p, countdown_s=0.0: None, runtimes=_runtimes())
        job_ended(context, job_id)

    _process["sweeper"] = Sweeper(
        ledger,
        settings.worker,
        name=f"{name}:{os.getpid()}",
        requeue=requeue,
        kill_containers=lambda job_id: kill_job_containers(settings, job_id),
        on_failed=on_failed,
    ).start()


@worker_shutting_down.connect
def _hand_back_running_phases(sender: Any = None, **_: Any) -> None:
    """Told to stop (SIGTERM: a warm shutdown): say so in Redis, where each running phase's heartbeat looks, so the
    phases hand themselves back (containers removed, queued again) instead of running on past the grace period."""
    settings = settings_of(app)
    hostname = str(sender or socket.gethostname())
    with contextlib.suppress(Exception):  # Redis away: the phases run on, and the sweep takes them over if killed
        Ledger.from_url(settings.broker_url).r.set(f"{STOPPING_PREFIX}{hostname}", "1", ex=600)


@worker_shutdown.connect
def _stop_sweeper(**_: Any) -> None:
    for name in ("sweeper", "watch"):
        running = _process.pop(name, None)
        if running is not None:
            running.stop()
