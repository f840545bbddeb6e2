"""The Celery application: ``celery -A orchestrator.worker.celery_app:app worker|flower``.

Broker and result backend are both ``ORCH_BROKER_URL`` (default ``redis://localhost:6379/0``). The module-level
``app`` is Celery's entry point, so it reads the settings (``ORCH_*``, ``ORCH_CONFIG``) when imported; code that
has its own settings builds one with :func:`create_app`.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from orchestrator.config import Settings, load_settings
from orchestrator.worker.names import QUEUE
from orchestrator.worker.time_limits import visibility_timeout_s
from orchestrator.workflow import phases
from orchestrator.workflow.phases import PhaseKind

TASK_NAMES = {kind: f"orchestrator.{kind.value}" for kind in (PhaseKind.PLAN, PhaseKind.ACT, PhaseKind.REFLECT)}


def create_app(settings: Settings | None = None) -> Celery:
    settings = settings or load_settings()
    app = Celery("orchestrator", broker=settings.broker_url, backend=settings.broker_url)
    visibility = visibility_timeout_s(settings)
    app.conf.update(
        # Ack a task only after it ran: a worker that dies mid-phase leaves the message to be delivered again.
        task_acks_late=True,
        # A worker reserves one task per process at a time, so a long phase never holds others hostage.
        worker_prefetch_multiplier=1,
        # A pool process killed under a task (OOM, SIGKILL) requeues the task instead of failing it.
        task_reject_on_worker_lost=True,
        # Redis redelivers an unacked task after this; it must exceed the longest hard time limit of a phase, or
        # a slow phase would also start on a second worker. (Dead workers are noticed much sooner by the ledger.)
        broker_transport_options={"visibility_timeout": visibility},
        result_backend_transport_options={"visibility_timeout": visibility},
        # Flower sees tasks from the moment they are sent, their progress events and their states.
        worker_send_task_events=True,
        task_send_sent_event=True,
        task_track_started=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=7 * 24 * 3600,
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
        # Keep trying while Redis restarts instead of losing the message being published.
        task_publish_retry_policy={"max_retries": 30, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 2},
        worker_hijack_root_logger=False,
    )
    app.conf.orch_settings = settings
    return app


def phase_task(token: str) -> tuple[str, dict[str, Any]]:
    """The task name and keyword arguments of a phase token (``workflow.phases``)."""
    phase = phases.parse(token)
    if isinstance(phase, phases.Done):
        raise ValueError("a goal that is done has no task")
    if isinstance(phase, phases.Act):
        return TASK_NAMES[phase.kind], {"step": phase.index}
    if isinstance(phase, phases.Plan) and phase.step is not None:
        return TASK_NAMES[phase.kind], {"step": phase.step}
    return TASK_NAMES[phase.kind], {}


app = create_app()
app.conf.include = ["orchestrator.worker.tasks"]
