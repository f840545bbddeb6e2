"""Per-producer quotas: jobs queued or running at once, and input bytes kept in Redis for its jobs.

Checked before a request stores anything; over a quota the whole request is refused with 429 and what is left, so
a producer never finds half of a batch queued.
"""

from __future__ import annotations

import time

from orchestrator.api.access import ApiRefusal
from orchestrator.api.keys import ApiKey
from orchestrator.config import Settings
from orchestrator.worker.indexes import owner_key
from orchestrator.worker.ledger import Ledger
from orchestrator.worker.records import TERMINAL
from orchestrator.worker.submit import MB, Checked


def usage(ledger: Ledger, settings: Settings, owner: str) -> tuple[int, int]:
    """``(active jobs, input bytes kept)`` of producer ``owner``: jobs not ended, and the inputs of its jobs
    submitted within the inputs' time to live (their bytes are still in Redis)."""
    active = 0
    kept = 0
    since = time.time() - settings.job_inputs.ttl_s
    for raw in ledger.r.zrevrange(owner_key(owner), 0, -1):
        record = ledger.get(raw.decode() if isinstance(raw, bytes) else str(raw))
        if record is None:
            continue
        if record.state not in TERMINAL:
            active += 1
        if record.submitted_at >= since and record.request is not None:
            kept += sum(ref.size for ref in record.request.inputs)
    return active, kept


def check_quotas(ledger: Ledger, settings: Settings, key: ApiKey, good: list[Checked]) -> None:
    """429 when the new lines would take the producer over a quota, naming it, the limit and what is left."""
    max_jobs = key.max_active_jobs or settings.api.max_active_jobs
    max_bytes = int((key.max_input_mb or settings.api.max_input_mb) * MB)
    active, kept = usage(ledger, settings, key.name)
    new_bytes = sum(len(b) for c in good for b in c.blobs)
    if active + len(good) > max_jobs:
        left = max(0, max_jobs - active)
        raise ApiRefusal(429, f"quota: {len(good)} new job(s) would exceed {max_jobs} jobs queued or running at "
                         f"once ({active} now, {left} left)", quota="active_jobs", limit=max_jobs, used=active,
                         left=left)
    if kept + new_bytes > max_bytes:
        left = max(0, max_bytes - kept)
        raise ApiRefusal(429, f"quota: {new_bytes} input bytes would exceed the {max_bytes} kept for your jobs "
                         f"({kept} kept now, {left} left)", quota="input_bytes", limit=max_bytes, used=kept,
                         left=left)
