"""A job's saved ``GoalState`` between phases (``orch:checkpoint:<id>``): saved by a phase's commit (leases.py),
only while its worker holds the lease; read here."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from orchestrator.worker.store import PREFIX, Store

if TYPE_CHECKING:  # the saved goal state pulls in the whole Act: only the worker's phases read or write it
    from orchestrator.workflow.goal import Checkpoint


def checkpoint_key(job_id: str) -> str:
    return f"{PREFIX}:checkpoint:{job_id}"


class Checkpoints(Store):
    def load_checkpoint(self, job_id: str) -> Checkpoint | None:
        """The state saved after the job's last phase (None before its first); ``WorkflowError`` when it was saved
        by another schema version or does not read back."""
        # Deferred: the goal's models load with the phases that need them, not with every reader of the ledger.
        from orchestrator.workflow.goal import Checkpoint

        raw = self.r.get(checkpoint_key(job_id))
        return Checkpoint.load(json.loads(raw)) if raw else None
