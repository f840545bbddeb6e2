"""Workers present (``orch:worker:<name>``, each with an expiry): alive, ready or not, and what each lacks."""

from __future__ import annotations

import json
import time
from typing import Any

from orchestrator.worker.store import PREFIX, Store

WORKER_PREFIX = f"{PREFIX}:worker:"


class Presence(Store):
    def announce_worker(self, name: str, info: dict[str, Any], *, ttl_s: float) -> None:
        """Say that worker ``name`` is alive (and ready or not, with what is missing) for the next ``ttl_s``."""
        self.r.set(WORKER_PREFIX + name, json.dumps({"name": name, "seen": time.time(), **info}), px=int(ttl_s * 1000))

    def withdraw_worker(self, name: str) -> None:
        self.r.delete(WORKER_PREFIX + name)

    def workers(self) -> list[dict[str, Any]]:
        """Workers announced recently (each ``{"name", "seen", "ready", "queues", "missing", …}``)."""
        keys = sorted(self.r.scan_iter(match=WORKER_PREFIX + "*", count=500))
        values = self.r.mget(keys) if keys else []
        return [json.loads(v) for v in values if v]
