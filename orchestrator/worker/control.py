"""What a producer or an operator does to a job that exists: cancel it, run it again (the API and the CLI alike)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from orchestrator.config import Settings
from orchestrator.worker.dispatch import enqueue_phase
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import RERUNNABLE, JobRecord
from orchestrator.worker.submit import next_run
from orchestrator.workflow import phases

BATCH_RERUNNABLE: frozenset[str] = frozenset({"failed", "unmet"})
"""A batch's re-run takes its failed and unmet jobs only (a cancelled one was stopped on purpose)."""


class Outcome(BaseModel):
    """``jobs ID --cancel|--rerun --json`` and ``POST /v1/jobs/{id}/cancel|rerun`` answer this."""

    job_id: str
    outcome: str
    """``cancelled`` | ``ended`` | ``missing`` (cancel); ``queued`` | ``refused`` | ``missing`` (re-run)."""
    previous_state: str | None = None
    state: str | None = None
    run: int | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("cancelled", "queued")


def cancel(ledger: Ledger, celery_app: Any, job_id: str, *, revoke_failed: Any = None) -> Outcome:
    """The ledger says ``cancelled`` at once; a queued phase's task is revoked, a running phase loses its lease
    and stops at its next heartbeat. ``revoke_failed(error)`` hears of a revoke that did not go through."""
    outcome, previous = ledger.cancel(job_id)
    record = ledger.get(job_id)
    if outcome == "cancelled" and record is not None and record.task_id:
        try:
            celery_app.control.revoke(record.task_id)
        except Exception as e:  # noqa: BLE001 - the ledger's state already stops the phase; Flower just shows less
            if revoke_failed is not None:
                revoke_failed(e)
    return Outcome(job_id=job_id, outcome=outcome, previous_state=previous)


def rerun(ledger: Ledger, settings: Settings, celery_app: Any, record: JobRecord) -> Outcome:
    """Run an ended job again from its plan (same id and goal line, ``run`` + 1), its earlier run kept."""
    if record.state not in RERUNNABLE:
        return Outcome(job_id=record.job_id, outcome="refused", state=record.state,
                       reason=f"job {record.job_id} is {record.state}: only a failed, unmet or cancelled job is run "
                       "again")
    fresh = next_run(record)
    outcome, previous = ledger.rerun(fresh)
    if outcome == "queued":
        enqueue_phase(celery_app, settings, ledger, fresh, phases.token(phases.FIRST))
    return Outcome(job_id=record.job_id, outcome=outcome, previous_state=previous, run=fresh.run)
