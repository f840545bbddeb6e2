"""Labels on everything the sandbox creates, and the reaper that removes what a dead process left behind.

Every container, volume and (egress) network carries ``<prefix>.managed``, its job, role, call, creation time
and *owner*: the host name, PID and start time of the process that made it. An orphan is a resource whose owner
process is gone (same host; the start time guards against PID reuse) or, for another host (e.g. a worker in its
own container), one older than a long grace period. Resources of live processes are never touched, so concurrent
jobs and test runs are safe."""

from __future__ import annotations

import os
import shutil
import socket
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.logs import get_logger
from orchestrator.sandbox.models import ReapReport

log = get_logger(__name__)

FOREIGN_GRACE_S = 3600.0


def _start_time(pid: int) -> str:
    """The process start time in clock ticks since boot (field 22 of /proc/PID/stat), or '' if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def owner_id() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_time(pid)}"


def owner_alive(owner: str) -> bool | None:
    """True/False for an owner on this host; None when the owner is on another host (cannot be checked)."""
    try:
        host, pid_text, started = owner.rsplit(":", 2)
        pid = int(pid_text)
    except ValueError:
        return None
    if host != socket.gethostname():
        return None
    if Path("/proc").is_dir():
        return Path(f"/proc/{pid}").exists() and (not started or _start_time(pid) == started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def labels(
    prefix: str, *, owner: str, job: str, role: str, call: int | None = None, goal: str = "", **extra: str
) -> dict[str, str]:
    out = {
        f"{prefix}.managed": "1",
        f"{prefix}.owner": owner,
        f"{prefix}.job": job,
        f"{prefix}.goal": goal or job,
        f"{prefix}.role": role,
        f"{prefix}.created": f"{time.time():.3f}",
    }
    if call is not None:
        out[f"{prefix}.call"] = str(call)
    out.update({f"{prefix}.{k}": v for k, v in extra.items()})
    return out


def is_orphan(
    resource_labels: dict[str, str], prefix: str, *, older_than_s: float, foreign_after_s: float, now: float
) -> bool:
    try:
        created = float(resource_labels.get(f"{prefix}.created", "0"))
    except ValueError:
        created = 0.0
    age = now - created
    if age < older_than_s:
        return False
    alive = owner_alive(resource_labels.get(f"{prefix}.owner", ""))
    if alive is None:
        return age >= max(older_than_s, foreign_after_s)
    return not alive


def reap_orphans(
    client: docker.DockerClient,
    prefix: str,
    *,
    older_than_s: float = 0.0,
    foreign_after_s: float = FOREIGN_GRACE_S,
    work_root: Path | None = None,
) -> ReapReport:
    """Remove orphaned containers, then their volumes and per-job folders (under ``work_root`` only)."""
    api = client.api
    now = time.time()
    report = ReapReport()
    managed = f"{prefix}.managed"
    folders: set[str] = set()
    for info in api.containers(all=True, filters={"label": managed}):
        info_labels = info.get("Labels") or {}
        if not is_orphan(info_labels, prefix, older_than_s=older_than_s, foreign_after_s=foreign_after_s, now=now):
            continue
        try:
            api.remove_container(info["Id"], force=True, v=False)
            report.containers.append(info["Names"][0].lstrip("/") if info.get("Names") else info["Id"][:12])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            log.warning("sandbox.reap.container_failed", container=info["Id"][:12], error=str(e))
    volumes: list[dict[str, Any]] = api.volumes(filters={"label": managed}).get("Volumes") or []
    for vol in volumes:
        vol_labels = vol.get("Labels") or {}
        if not is_orphan(vol_labels, prefix, older_than_s=older_than_s, foreign_after_s=foreign_after_s, now=now):
            continue
        if _remove_volume(api, vol["Name"]):
            report.volumes.append(vol["Name"])
            if jobdir := vol_labels.get(f"{prefix}.jobdir"):
                folders.add(jobdir)
    for net in api.networks(filters={"label": managed}):
        net_labels = net.get("Labels") or {}
        orphan = is_orphan(net_labels, prefix, older_than_s=older_than_s, foreign_after_s=foreign_after_s, now=now)
        if orphan and _remove_network(api, net["Id"]):
            report.networks.append(net.get("Name") or net["Id"][:12])
    for folder in sorted(folders):
        path = Path(folder)
        if work_root is not None and path.is_relative_to(work_root) and path.exists():
            shutil.rmtree(path, ignore_errors=True)
            report.folders.append(folder)
    if report.containers or report.volumes or report.networks:
        log.info(
            "sandbox.reaped",
            containers=len(report.containers),
            volumes=len(report.volumes),
            networks=len(report.networks),
        )
    return report


def _remove_volume(api: docker.APIClient, name: str, attempts: int = 5) -> bool:
    """Remove a volume; a just-removed container may keep it "in use" for a moment, so retry briefly."""
    for attempt in range(attempts):
        try:
            api.remove_volume(name, force=False)
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            if e.status_code != 409 or attempt == attempts - 1:
                log.warning("sandbox.volume_remove_failed", volume=name, error=str(e))
                return False
            time.sleep(0.05 * (attempt + 1))
    return False


def _remove_network(api: docker.APIClient, network_id: str) -> bool:
    """Remove an egress network (its containers are gone first; an endpoint may linger for a moment)."""
    for attempt in range(5):
        try:
            api.remove_network(network_id)
            return True
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError as e:
            if attempt == 4:
                log.warning("sandbox.network_remove_failed", network=network_id[:12], error=str(e))
                return False
            time.sleep(0.1 * (attempt + 1))
    return False


def remove_job_resources(client: docker.DockerClient, prefix: str, job_id: str) -> int:
    """Force-remove the containers and volumes of one goal: exactly those labelled ``<prefix>.goal=<job_id>``.

    Used when a job is taken over or hits its time limit: its containers are children of the engine, not of
    the worker process, so they outlive a killed worker. The engine filters by label *equality*, never by a
    prefix: job ``acme`` never touches the sandbox of job ``acme-report`` (or of ``acme-0``). Returns how many
    containers were removed.
    """
    api = client.api
    exact = f"{prefix}.goal={job_id}"

    def ours(resource_labels: dict[str, str] | None) -> bool:
        return (resource_labels or {}).get(f"{prefix}.goal") == job_id  # the engine's filter, checked again

    removed = 0
    for info in api.containers(all=True, filters={"label": exact}):
        if ours(info.get("Labels")):
            try:
                api.remove_container(info["Id"], force=True, v=False)
                removed += 1
            except docker.errors.NotFound:
                pass
    for vol in api.volumes(filters={"label": exact}).get("Volumes") or []:
        if ours(vol.get("Labels")):
            _remove_volume(api, vol["Name"])
    for net in api.networks(filters={"label": exact}):
        if ours(net.get("Labels")):
            _remove_network(api, net["Id"])
    if removed:
        log.info("sandbox.job_removed", job=job_id, containers=removed)
    return removed
