"""Sending a phase's task: used by the producer (the first phase) and by each phase (the next one)."""

from __future__ import annotations

from typing import Any

from orchestrator.config import Settings
from orchestrator.worker.bookkeeping import job_settings
from orchestrator.worker.celery_app import phase_task
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import JobRecord
from orchestrator.worker.time_limits import hard_limit_s, soft_limit_s
from orchestrator.workflow import phases


def send_phase(celery_app: Any, settings: Settings, record: JobRecord, phase: str, *, countdown_s: float = 0.0) -> str:
    """Queue ``phase`` of a job (``countdown_s``: to run not before that many seconds from now), with time limits
    from its budgets and readable arguments for Flower; returns the task's id."""
    name, kwargs = phase_task(phase)
    limits_settings = job_settings(settings, record.request)
    kind = phases.parse(phase).kind
    shown = f"job={record.job_id}"
    if "step" in kwargs:
        skill = record.plan[kwargs["step"]] if kwargs["step"] < len(record.plan) else "?"
        shown += f" step={kwargs['step']} skill={skill}"
    sent = celery_app.send_task(
        name,
        args=[record.job_id],
        kwargs=kwargs,
        argsrepr=shown,
        kwargsrepr=f"goal={record.goal[:80]!r}",
        soft_time_limit=soft_limit_s(limits_settings, kind),
        time_limit=hard_limit_s(limits_settings, kind),
        countdown=countdown_s if countdown_s > 0 else None,
    )
    return str(sent.id)




def enqueue_phase(
    celery_app: Any, settings: Settings, ledger: Ledger, record: JobRecord, phase: str, *, countdown_s: float = 0.0
) -> None:
    """Send ``phase`` and remember its task id in the ledger (``jobs ID --cancel`` revokes it)."""
    ledger.update(record.job_id, task_id=send_phase(celery_app, settings, record, phase, countdown_s=countdown_s))
