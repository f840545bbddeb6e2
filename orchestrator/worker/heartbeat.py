"""Liveness without Celery's help: a heartbeat thread per running phase, and a sweep thread in every worker.

Redis redelivers the task of a dead worker only after the visibility timeout (hours: time_limits.py); the ledger
notices in about ``stale_after_s`` instead: a running job's heartbeat stops, a live worker's sweep takes the job
over (attempts + 1, the old lease dropped, its sandbox containers killed) and queues the phase again.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from types import TracebackType

from orchestrator.config import WorkerSettings
from orchestrator.logs import get_logger
from orchestrator.worker.ledger import Ledger

log = get_logger("orchestrator.worker")


class Heartbeat:
    """While a phase runs: renew the lease and write the heartbeat every ``interval_s``."""

    def __init__(
        self, ledger: Ledger, job_id: str, token: str, *, interval_s: float, lease_s: float, interrupt: bool = False,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        self._ledger = ledger
        self._job_id = job_id
        self._token = token
        self._interval_s = interval_s
        self._lease_s = lease_s
        self._stop = threading.Event()
        self.lost = False
        self._stopping = stopping
        """Says when this worker is stopping (SIGTERM): the phase is then interrupted and handed back."""
        """True once the lease passed to another worker (this run's results will be dropped)."""
        self._thread = threading.Thread(target=self._run, name=f"heartbeat:{job_id}", daemon=True)
        # Only a phase in the main thread can be interrupted (by the soft limit's signal, see time_limits.py).
        self._interrupt = interrupt and threading.current_thread() is threading.main_thread()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                if not self._ledger.renew(self._job_id, self._token, self._lease_s):
                    self.lost = True
                    log.warning("heartbeat.lease_lost", job=self._job_id)
                    if self._interrupt and not self._stop.is_set() and hasattr(signal, "SIGUSR1"):
                        os.kill(os.getpid(), signal.SIGUSR1)
                    return
                if self._stopping is not None and self._stopping():
                    log.warning("heartbeat.worker_stopping", job=self._job_id)
                    if self._interrupt and not self._stop.is_set() and hasattr(signal, "SIGUSR1"):
                        os.kill(os.getpid(), signal.SIGUSR1)  # the phase hands itself back (worker.phases)
                    return
            except Exception as e:  # noqa: BLE001 - Redis may be restarting; the next beat tries again
                log.warning("heartbeat.failed", job=self._job_id, error=str(e))


Requeue = Callable[[str, str, int], None]
"""Queue ``(job id, phase)`` again, after a backoff grown with the attempts so far."""
"""``requeue(job_id, phase)``"""


class Sweeper:
    """Every ``sweep_every_s``: take over running jobs whose heartbeat is stale (in every worker; the ledger's
    Lua script makes sure only one sweep wins each takeover)."""

    def __init__(
        self,
        ledger: Ledger,
        settings: WorkerSettings,
        *,
        name: str,
        requeue: Requeue,
        kill_containers: Callable[[str], int],
        on_failed: Callable[[str], None],
    ) -> None:
        self._ledger = ledger
        self._settings = settings
        self._name = name
        self._requeue = requeue
        self._kill = kill_containers
        self._on_failed = on_failed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledger-sweep", daemon=True)

    def start(self) -> Sweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._settings.sweep_every_s):
            try:
                self.sweep_once()
            except Exception as e:  # noqa: BLE001 - keep sweeping through Redis restarts
                log.warning("sweep.failed", error=str(e))

    def sweep_once(self) -> list[str]:
        """Take over what is stale now; returns the job ids taken over or failed."""
        touched = []
        for job_id in self._ledger.running_ids():
            before = self._ledger.get(job_id)  # the silent worker's attempt, as it was when it went silent
            outcome, phase, attempts = self._ledger.take_over_if_stale(
                job_id,
                stale_after_s=self._settings.stale_after_s,
                max_attempts=self._settings.max_attempts,
                sweeper=self._name,
            )
            if outcome == "fresh":
                continue
            touched.append(job_id)
            killed = self._kill(job_id)
            record = self._ledger.get(job_id)
            # The entry is the lost attempt itself: its worker, from when it took the phase to its last heartbeat.
            last_beat = (before.heartbeat if before else None) or time.time()
            self._ledger.add_history(
                job_id,
                {
                    "phase": phase,
                    "worker": (before.worker if before else None) or "?",
                    "attempt": max(1, attempts - 1),
                    "start": (before.phase_started if before else None) or last_beat,
                    "end": last_beat,
                    "outcome": "lost" if outcome == "requeue" else "failed",
                    "reason": record.reason if record else "",
                    "taken_over_by": self._name,
                    "taken_over_at": time.time(),
                    "containers_removed": killed,
                },
            )
            log.warning("sweep.took_over", job=job_id, phase=phase, attempts=attempts, outcome=outcome, killed=killed)
            if outcome == "requeue":
                self._requeue(job_id, phase, attempts)
            else:
                self._on_failed(job_id)
        return touched
