"""Who may see which job: the one place the API filters by owner.

A producer's key sees, cancels, re-runs and downloads the jobs it submitted and nothing else; an admin key sees
every job. A job of another producer is answered exactly as a job that does not exist (the same error, the same
words), so no answer tells one producer anything about another's jobs, batches, inputs or hashes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.errors import OrchestratorError
from orchestrator.worker.indexes import batch_ids, owned_ids
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import JobRecord
from orchestrator.workflow.request import job_id_ok


class Caller(BaseModel):
    """The producer a request's key belongs to."""

    model_config = ConfigDict(frozen=True)

    name: str
    admin: bool = False


class ApiRefusal(OrchestratorError):
    """An answer other than 2xx, with its HTTP status and a body for the producer."""

    def __init__(self, status: int, message: str, **data: Any) -> None:
        super().__init__(message, where="api", **data)
        self.status = status


def not_found(what: str, name: str) -> ApiRefusal:
    return ApiRefusal(404, f"no {what} {name[:120]!r}")


def may_see(caller: Caller, record: JobRecord) -> bool:
    return caller.admin or (record.owner is not None and record.owner == caller.name)


def find_job(ledger: Ledger, caller: Caller, job_id: str) -> JobRecord:
    """The job ``job_id`` if the caller may see it; otherwise the 404 of a job that does not exist."""
    record = ledger.get(job_id) if job_id_ok(job_id) else None
    if record is None or not may_see(caller, record):
        raise not_found("job", job_id)
    return record


def visible_ids(ledger: Ledger, caller: Caller) -> list[str]:
    """Every job id the caller may see, newest first."""
    return ledger.job_ids() if caller.admin else owned_ids(ledger, caller.name)


def visible_jobs(ledger: Ledger, caller: Caller) -> Iterator[JobRecord]:
    for job_id in visible_ids(ledger, caller):
        record = ledger.get(job_id)
        if record is not None and may_see(caller, record):
            yield record


def find_batch(ledger: Ledger, caller: Caller, batch: str) -> list[JobRecord]:
    """The caller's jobs of batch ``batch`` (an admin: all of them); a batch with none of them is not found."""
    if not job_id_ok(batch):  # a batch id is spelt like a job id
        raise not_found("batch", batch)
    records = [r for i in batch_ids(ledger, batch) if (r := ledger.get(i)) is not None and may_see(caller, r)]
    if not records:
        raise not_found("batch", batch)
    return records
