"""The host-specific values ``compose.yaml`` needs, written to ``.env`` beside it.

Workers start sandbox containers through the host's Docker engine, which resolves every bind and overlay path on
the *host*: the skills folder, the cache folder (the sandbox's per-job folders live there) and the output root must
therefore be mounted into the worker at the same absolute paths as on the host. Those paths, the user the worker
runs as (the host user, so results belong to them) and the Docker socket's group (so that user may reach the
engine) differ per machine; this module computes them. Both ``docker compose`` and ``docker-compose`` 1.29 read
``.env`` from the project folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel

from orchestrator.errors import DeployError

MARKER = "# Written by `python -m orchestrator compose env --write`"
NOTE = "# Host paths are mounted at the same paths inside the workers; lines you add below are kept."
DEFAULT_SOCKET = Path("/var/run/docker.sock")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_./:@+=,-]*$")


class HostEnv(BaseModel):
    """What ``compose.yaml`` interpolates (``${NAME}``); every path absolute."""

    ORCH_HOST_ROOT: str
    ORCH_SKILLS_DIR: str
    ORCH_SCENARIOS_DIR: str
    ORCH_OUTPUT_ROOT: str
    ORCH_CACHE_DIR: str
    ORCH_UID: int
    ORCH_GID: int
    DOCKER_GID: int
    ORCH_DOCKER_SOCKET: str

    def lines(self) -> list[str]:
        return [f"{name}={value}" for name, value in self.model_dump().items()]


def docker_socket() -> Path:
    """The engine's Unix socket: ``DOCKER_HOST`` when it names one, else ``/var/run/docker.sock``."""
    host = os.environ.get("DOCKER_HOST", "")
    if host.startswith("unix://"):
        return Path(urlsplit(host).path)
    if host:
        raise DeployError(
            f"DOCKER_HOST={host} is not a Unix socket; workers mount the engine's socket",
            where="compose:env",
            next_step="run on the engine's host with its Unix socket (unset DOCKER_HOST)",
        )
    return DEFAULT_SOCKET


def compute(root: Path, *, cache_dir: Path, output_root: Path | None = None, skills: Path | None = None) -> HostEnv:
    """The values for this host and user, creating the cache folder and output root (owned by the user)."""
    root = root.resolve()
    socket = docker_socket()
    try:
        socket_gid = socket.stat().st_gid
    except OSError as e:
        raise DeployError(
            f"cannot stat the Docker socket {socket}: {e.strerror or e}",
            where="compose:env",
            next_step="start dockerd (bash ops/setup.sh) and run this again",
        ) from e
    output = (output_root or root / "out" / "jobs").resolve()
    cache = cache_dir.expanduser().resolve()
    for folder in (output, cache):
        folder.mkdir(parents=True, exist_ok=True)
    env = HostEnv(
        ORCH_HOST_ROOT=str(root),
        ORCH_SKILLS_DIR=str((skills or root / "skills").resolve()),
        ORCH_SCENARIOS_DIR=str(root / "ops" / "scenarios"),
        ORCH_OUTPUT_ROOT=str(output),
        ORCH_CACHE_DIR=str(cache),
        ORCH_UID=os.getuid(),
        ORCH_GID=os.getgid(),
        DOCKER_GID=socket_gid,
        ORCH_DOCKER_SOCKET=str(socket),
    )
    for name, value in env.model_dump().items():
        if not _SAFE_VALUE.match(str(value)):
            raise DeployError(
                f"{name}={value!r} has characters .env files and mount specs do not carry safely",
                where="compose:env",
                next_step="use a checkout and folders whose paths have no spaces, quotes, '$' or '#'",
            )
    return env


def write(env: HostEnv, path: Path) -> None:
    """Write ``.env``, keeping lines a person added (``ORCH_FLOWER_AUTH=...``); a foreign file is never touched."""
    kept: list[str] = []
    if path.exists():
        previous = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if MARKER not in previous:
            raise DeployError(
                f"{path} exists and was not written by this command",
                where="compose:env",
                next_step="add the printed lines to it yourself, or move it away and run again",
            )
        ours = set(HostEnv.model_fields)
        kept = [line for line in previous if line not in (MARKER, NOTE) and line.split("=", 1)[0] not in ours]
    path.write_text("\n".join([MARKER, NOTE, *env.lines(), *kept]) + "\n", encoding="utf-8")
