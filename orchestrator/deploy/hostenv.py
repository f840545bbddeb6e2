"""The host-specific values ``compose.yaml`` needs, written to ``.env`` beside it.

Workers start sandbox containers through the host's Docker engine, which resolves every bind and overlay path on
the *host*: the skills folder, the cache folder (the sandbox's per-job folders live there) and the output root must
therefore be mounted into the worker at the same absolute paths as on the host. Those paths, the user the worker
runs as (the host user, so results belong to them) and the Docker socket's group (so that user may reach the
engine) differ per machine; this module computes them. Both ``docker compose`` and ``docker-compose`` 1.29 read
``.env`` from the project folder.

The workers' own settings that hold secrets — the egress grants (``ORCH_EGRESS``) and the granted secrets' values
(``ORCH_SECRET_<NAME>``) — are not in ``.env`` (every service would see them) but in the file
``ORCH_WORKER_ENV_FILE`` names (``.env.worker`` by default, made empty and owner-only by :func:`write`), which
compose hands to the worker service alone (``env_file``).

It also holds the stack's two secrets: the Redis password and Flower's login. They are generated at random the
first time (never a fixed default) and kept as they are on every rewrite, so a running stack and its producers
keep working; the file is written owner-only (``0600``).
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel

from orchestrator.errors import DeployError

MARKER = "# Written by `python -m orchestrator compose env --write`"
NOTE = "# Host paths are mounted at the same paths inside the workers; lines you add below are kept."
DEFAULT_SOCKET = Path("/var/run/docker.sock")
_SAFE_VALUE = re.compile(r"^[A-Za-z0-9_./:@+=,-]*$")
_PASSWORD = re.compile(r"^[A-Za-z0-9_.~-]{16,200}$")
"""A Redis password goes into URLs and a config line unquoted: URL-unreserved characters only, 16 at least."""
_FLOWER_LOGIN = re.compile(r"^[A-Za-z0-9_.-]{1,64}:[A-Za-z0-9_.~-]{12,200}$")
WORKER_ENV_NAME = ".env.worker"
WORKER_ENV_HEADER = """\
# The compose worker's own settings (compose.yaml: env_file of the worker service only), owner-only.
# NAME=value lines, e.g. the egress grants (one line of JSON) and each granted secret's value:
#   ORCH_EGRESS={"grants": [{"library": "default", "hosts": ["api.example.com"],
#                "secrets": {"API_TOKEN": {"host": "api.example.com"}}}]}     (all on one line)
#   ORCH_SECRET_API_TOKEN=the-value
"""
RETIRED_DEFAULTS = {"ORCH_FLOWER_AUTH": {"admin:orchestrator"}}
"""Values that were once fixed defaults: an .env still holding one gets a random value instead."""


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
    ORCH_REDIS_PASSWORD: str
    """Redis requires it (``requirepass``); workers and Flower reach Redis with it."""
    ORCH_FLOWER_AUTH: str
    """Flower's basic-auth login, ``user:password``."""
    ORCH_WORKER_ENV_FILE: str
    """The worker service's ``env_file``: ``ORCH_EGRESS``, ``ORCH_SECRET_<NAME>`` and other worker-only settings."""

    def lines(self) -> list[str]:
        return [f"{name}={value}" for name, value in self.model_dump().items()]


def read_values(path: Path) -> dict[str, str]:
    """``NAME=value`` lines of an env file (comments and other lines skipped); empty when there is no file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return {}
    values: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.strip().partition("=")
        if sep and name and not name.startswith("#"):
            values[name.strip()] = value.strip()
    return values


def stack_secrets(existing: dict[str, str]) -> dict[str, str]:
    """The Redis password and Flower login: those in ``existing`` (an .env) when set and sound, else random ones."""
    chosen = {
        "ORCH_REDIS_PASSWORD": existing.get("ORCH_REDIS_PASSWORD") or secrets.token_urlsafe(24),
        "ORCH_FLOWER_AUTH": existing.get("ORCH_FLOWER_AUTH") or f"admin:{secrets.token_urlsafe(18)}",
    }
    if chosen["ORCH_FLOWER_AUTH"] in RETIRED_DEFAULTS["ORCH_FLOWER_AUTH"]:
        chosen["ORCH_FLOWER_AUTH"] = f"admin:{secrets.token_urlsafe(18)}"
    if not _PASSWORD.match(chosen["ORCH_REDIS_PASSWORD"]):
        raise DeployError(
            "ORCH_REDIS_PASSWORD in .env must be 16 to 200 of the characters A-Z a-z 0-9 _ . ~ - "
            "(it goes into redis:// URLs unquoted)",
            where="compose:env",
            next_step="delete the line from .env and run compose env --write again: a random one is generated",
        )
    if not _FLOWER_LOGIN.match(chosen["ORCH_FLOWER_AUTH"]):
        raise DeployError(
            "ORCH_FLOWER_AUTH in .env must be user:password, the password at least 12 of A-Z a-z 0-9 _ . ~ -",
            where="compose:env",
            next_step="delete the line from .env and run compose env --write again: a random one is generated",
        )
    return chosen


def producer_broker_url(values: dict[str, str], host: str = "127.0.0.1") -> str:
    """The URL producers on this host use to reach the stack's Redis (its published port, with the password)."""
    password = values.get("ORCH_REDIS_PASSWORD")
    if not password:
        raise DeployError(
            "no ORCH_REDIS_PASSWORD in .env",
            where="compose:env",
            next_step="run python -m orchestrator compose env --write first",
        )
    return f"redis://:{password}@{host}:{values.get('ORCH_REDIS_PORT') or '6380'}/0"


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


def compute(
    root: Path,
    *,
    cache_dir: Path,
    output_root: Path | None = None,
    skills: Path | None = None,
    existing: dict[str, str] | None = None,
) -> HostEnv:
    """The values for this host and user, creating the cache folder and output root (owned by the user).

    The secrets are taken from ``existing`` (the current .env's values) when it holds them, else generated.
    """
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
    worker_env = Path((existing or {}).get("ORCH_WORKER_ENV_FILE") or root / WORKER_ENV_NAME).expanduser()
    if not worker_env.is_absolute():
        worker_env = root / worker_env
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
        ORCH_WORKER_ENV_FILE=str(worker_env),
        **stack_secrets(existing or {}),
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
    """Write ``.env`` owner-only, keeping lines a person added (``ORCH_REDIS_PORT=...``); a foreign file is never
    touched. Pass the file's current values to :func:`compute` first, so its secrets are kept. The worker's env
    file is made (empty, owner-only) when it does not exist; an existing one is never changed."""
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
    text = "\n".join([MARKER, NOTE, *env.lines(), *kept]) + "\n"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)  # an older .env may have been world-readable
        fh.write(text)
    ensure_worker_env(Path(env.ORCH_WORKER_ENV_FILE))


def ensure_worker_env(path: Path) -> None:
    """Create the worker's env file (comments only, ``0600``) unless it exists: compose refuses a missing one."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    except OSError as e:
        raise DeployError(
            f"cannot create the worker's env file {path}: {e.strerror or e}",
            where="compose:env",
            next_step="set ORCH_WORKER_ENV_FILE in .env to a file the worker service may read",
        ) from e
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(WORKER_ENV_HEADER)
