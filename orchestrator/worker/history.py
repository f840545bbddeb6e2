"""A job's history in the ledger: its phase runs in order (``orch:history:<id>``), and the archived history of each
earlier run (``orch:history:<id>:<run>``)."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.worker.store import PREFIX, Store

# KEYS: history. ARGV: entry (JSON). An entry equal to the last one is this call sent again after its reply was lost
# (every entry carries its own start and end times), so it is not added twice.
_ADD = """
if redis.call('LINDEX', KEYS[1], -1) == ARGV[1] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
"""


def history_key(job_id: str, run: int | None = None) -> str:
    """The history of the job's current run, or (``run``) of an earlier run kept by a re-run."""
    return f"{PREFIX}:history:{job_id}" + (f":{run}" if run is not None else "")


class History(Store):
    def add_history(self, job_id: str, entry: dict[str, Any]) -> None:
        self.script(_ADD)(keys=[history_key(job_id)], args=[json.dumps(entry)])

    def history(self, job_id: str, run: int | None = None) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.r.lrange(history_key(job_id, run), 0, -1)]
