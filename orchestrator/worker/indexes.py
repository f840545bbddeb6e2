"""Indexes of jobs beside the ledger's own (newest first): by batch (``orch:batch:<b>``) and by producer
(``orch:owner:<name>``)."""

from __future__ import annotations

from orchestrator.worker.store import PREFIX, Store, text


def batch_ids(ledger: Store, batch: str) -> list[str]:
    """The job ids of one batch, in submission order."""
    return [text(i) for i in ledger.r.zrange(f"{PREFIX}:batch:{batch}", 0, -1)]


def add_to_batch(ledger: Store, batch: str, job_id: str, at: float) -> None:
    ledger.r.zadd(f"{PREFIX}:batch:{batch}", {job_id: at}, nx=True)


def owner_key(owner: str) -> str:
    return f"{PREFIX}:owner:{owner}"


def add_to_owner(ledger: Store, owner: str, job_id: str, at: float) -> None:
    """Index a job under its producer (``GET /v1/jobs`` lists a producer's jobs without reading everyone's)."""
    ledger.r.zadd(owner_key(owner), {job_id: at})


def owned_ids(ledger: Store, owner: str, *, limit: int = 0) -> list[str]:
    """The job ids of one producer, newest first (all, or the ``limit`` newest)."""
    ids = ledger.r.zrevrange(owner_key(owner), 0, limit - 1 if limit > 0 else -1)
    return [text(i) for i in ids]
