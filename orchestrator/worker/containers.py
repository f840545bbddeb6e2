"""A job's sandbox containers, removed by the worker: before a phase runs again, when a phase is handed back or
runs past its time limit, and when the sweep takes over a dead worker's job."""

from __future__ import annotations

from orchestrator.config import Settings
from orchestrator.logs import get_logger
from orchestrator.sandbox.engine import connect
from orchestrator.sandbox.reaper import remove_job_resources

_log = get_logger("orchestrator.worker")


def kill_job_containers(settings: Settings, job_id: str) -> int:
    """Remove the sandbox containers of ``job_id`` (0 when no Docker engine is reachable from here)."""
    try:
        client = connect(timeout_s=30)
        try:
            return remove_job_resources(client, settings.sandbox.label_prefix, job_id)
        finally:
            client.close()
    except Exception as e:  # noqa: BLE001 - clean-up is best effort; the reaper catches what is left
        _log.warning("worker.kill_containers_failed", job=job_id, error=str(e))
        return 0
