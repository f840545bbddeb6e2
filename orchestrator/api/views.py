"""What ``jobs ID --json`` and ``GET /v1/jobs/{id}`` print for one job, and ``jobs --batch B --json`` for a batch."""

from __future__ import annotations

from typing import Any

from orchestrator.config import Settings
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import JobRecord
from orchestrator.worker.views import batch_report, no_worker_note, summary


def job_view(ledger: Ledger, settings: Settings, record: JobRecord) -> dict[str, Any]:
    """The record with the state as shown (``stalled``; ``queued`` with ``waiting_for`` between phases), its folders
    and its earlier runs."""
    shown = summary(record, settings, note=no_worker_note(ledger) if not record.running else None)
    data = record.model_dump(mode="json")
    data.update(
        state=shown["state"],
        ledger_state=record.state,
        out_dir=shown["out_dir"],
        evidence_path=shown["evidence_path"],
        earlier_runs=[summary(r, settings) for r in ledger.earlier_runs(record.job_id, record.run)],
    )
    for key in ("stalled_since", "note", "waiting_for"):
        if key in shown:
            data[key] = shown[key]
    return data


def batch_view(settings: Settings, batch: str, records: list[JobRecord], report: str | None = None) -> dict[str, Any]:
    """Counts, durations, failures and each job's summary."""
    facts = batch_report(records, settings)
    return {"batch": batch, **facts, "report": report, "jobs": [summary(r, settings) for r in records]}
