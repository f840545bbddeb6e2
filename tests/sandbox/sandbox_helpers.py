"""Helpers shared by the sandbox tests."""

from __future__ import annotations

import hashlib
from pathlib import Path

from orchestrator.sandbox.reaper import owner_alive, owner_id

TEST_LABEL_PREFIX = "orchtest"  # as in tests/conftest.py


def leftovers(docker_client, prefix: str = TEST_LABEL_PREFIX) -> list[str]:
    """Containers, volumes and networks of ours (this process, or a process that has died) still present."""
    me = owner_id()
    key = f"{prefix}.managed"

    def ours(labels: dict[str, str]) -> bool:
        owner = labels.get(f"{prefix}.owner", "")
        return owner == me or owner_alive(owner) is False

    found = [
        f"container {c['Names'][0]}"
        for c in docker_client.api.containers(all=True, filters={"label": key})
        if ours(c.get("Labels") or {})
    ]
    volumes = docker_client.api.volumes(filters={"label": key}).get("Volumes") or []
    found += [f"volume {v['Name']}" for v in volumes if ours(v.get("Labels") or {})]
    networks = docker_client.api.networks(filters={"label": key})
    found += [f"network {n['Name']}" for n in networks if ours(n.get("Labels") or {})]
    return found


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (without following symlinks) with its content hash or link target."""
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = f"link:{path.readlink()}"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out
