"""What a producer does to one job: cancel it, run it again, fetch its files (`jobs ID --cancel|--rerun|--download`)."""

from __future__ import annotations

from pathlib import Path

from orchestrator.cli.common import emit_json, notice
from orchestrator.cli.download import download
from orchestrator.config import Settings
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import RERUNNABLE
from orchestrator.worker.submit import next_run
from orchestrator.workflow import phases

EXIT_REFUSED = 1


def cancel_job(ledger: Ledger, settings: Settings, job_id: str, *, as_json: bool) -> int:
    """Cancel: the ledger says ``cancelled`` at once; a queued phase is revoked, a running one loses its lease and
    stops at its next heartbeat (its containers killed by its worker); the files stay, listed as partial."""
    # Deferred: the Celery app module reads the settings when imported; only the commands that send need it.
    from orchestrator.worker.celery_app import create_app

    outcome, previous = ledger.cancel(job_id)
    record = ledger.get(job_id)
    if outcome == "cancelled" and record is not None and record.task_id:
        try:
            create_app(settings).control.revoke(record.task_id)
        except Exception as e:  # noqa: BLE001 - the ledger's state already stops the phase; Flower just shows less
            notice("jobs.revoke_failed", f"job {job_id}: its task was not revoked ({e})", level="warning")
    if as_json:
        emit_json({"job_id": job_id, "outcome": outcome, "previous_state": previous})
    elif outcome == "cancelled":
        notice("jobs.cancelled", f"job {job_id} cancelled (it was {previous}); its files are kept and marked "
               f"partial; jobs {job_id} --rerun runs it again")
    else:
        notice("jobs.cancel_refused", f"job {job_id} already ended {previous}: nothing to cancel", level="warning")
    return 0 if outcome == "cancelled" else EXIT_REFUSED


def rerun_job(ledger: Ledger, settings: Settings, job_id: str, *, as_json: bool) -> int:
    """Run an ended job again from its plan (same id and goal line, ``run`` + 1); the earlier run's record,
    history and evidence stay (``jobs ID --json`` → ``earlier_runs``)."""
    # Deferred: the Celery app module reads the settings when imported; only the commands that send need it.
    from orchestrator.worker.celery_app import create_app
    from orchestrator.worker.dispatch import enqueue_phase

    record = ledger.get(job_id)
    assert record is not None
    if record.state not in RERUNNABLE:
        why = f"job {job_id} is {record.state}: only a failed, unmet or cancelled job is run again"
        if as_json:
            emit_json({"job_id": job_id, "outcome": "refused", "state": record.state, "reason": why})
        else:
            notice("jobs.rerun_refused", why, level="warning")
        return EXIT_REFUSED
    fresh = next_run(record)
    outcome, previous = ledger.rerun(fresh)
    if outcome == "queued":
        enqueue_phase(create_app(settings), settings, ledger, fresh, phases.token(phases.FIRST))
    if as_json:
        emit_json({"job_id": job_id, "outcome": outcome, "previous_state": previous, "run": fresh.run})
    elif outcome == "queued":
        notice("jobs.rerun", f"job {job_id} queued again (run {fresh.run}; run {record.run} ended {previous} "
               f"and is kept)")
    else:
        notice("jobs.rerun_refused", f"job {job_id} not re-run: {previous}", level="warning")
    return 0 if outcome == "queued" else EXIT_REFUSED


def download_job(ledger: Ledger, settings: Settings, job_id: str, dest: Path, *, as_json: bool) -> int:
    return download(ledger, settings, job_id, dest, as_json=as_json)
