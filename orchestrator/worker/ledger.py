"""The job ledger in Redis: ours, because Flower's history lives in memory and Redis keeps no redelivery count.

One client, its parts each in the module named for what it holds: a job's record and every write of it
(records.py), the lease and the transitions of a phase's run (leases.py), the phase history (history.py), the saved
state between phases (checkpoints.py), the workers present (presence.py), the goals' spans (spans.py); beside them
the batch and producer indexes (indexes.py) and the input and download blobs (blobs.py).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from orchestrator.errors import WorkflowError
from orchestrator.worker.checkpoints import Checkpoints
from orchestrator.worker.leases import Leases
from orchestrator.worker.presence import Presence
from orchestrator.worker.spans import Spans
from orchestrator.worker.store import PREFIX, text
from orchestrator.worker.tenancy import STACK_PATTERN


class Ledger(Leases, Checkpoints, Presence, Spans):
    """Read and write the ledger. One per process; thread-safe (redis-py pools its connections)."""

    @classmethod
    def from_url(cls, url: str, *, outage_s: float = 0) -> Ledger:
        """A ledger on ``url``. With ``outage_s``, every call keeps retrying for about that long while Redis cannot
        be reached (a restart): workers ride out a restart mid-phase; commands run by people fail fast."""
        retry = Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=max(3, int(outage_s) + 5)) if outage_s else None
        kwargs: dict[str, Any] = {"retry": retry} if retry is not None else {}
        return cls(redis.Redis.from_url(url, socket_connect_timeout=5, health_check_interval=30, **kwargs))

    def stack_id(self) -> str:
        """This ledger's identity, made once (first caller wins) and kept in Redis; a value this program did not
        make (it names evidence folders) is refused."""
        self.r.set(f"{PREFIX}:stack", secrets.token_hex(6), nx=True)
        stack = text(self.r.get(f"{PREFIX}:stack"))
        if not re.fullmatch(STACK_PATTERN, stack):
            raise WorkflowError(
                f"the ledger's identity {PREFIX}:stack in Redis is {stack[:80]!r}, not one this program made",
                where="ledger",
                next_step=f"protect Redis (password, ACL users), then DEL {PREFIX}:stack",
            )
        return stack
