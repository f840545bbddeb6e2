"""The Docker engine as the sandbox sees it: connecting, translating SDK errors, and the host work folder."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import docker
import docker.errors
import requests

from orchestrator.errors import SandboxError, SandboxErrorCode

BUILD_IMAGE_HINT = "python -m orchestrator sandbox build-image"


def connect(timeout_s: float = 60) -> docker.DockerClient:
    """A client of the local engine (``DOCKER_HOST`` honoured), or a retryable :class:`SandboxError`."""
    try:
        client = docker.from_env(timeout=int(timeout_s))
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException) as e:
        raise SandboxError(
            f"the Docker engine is not reachable: {e}",
            where="sandbox:engine",
            next_step="start the Docker daemon (or set DOCKER_HOST) and retry",
            retryable=True,
            code=SandboxErrorCode.ENGINE_UNREACHABLE,
        ) from e
    return client


@contextmanager
def docker_errors(where: str) -> Iterator[None]:
    """Translate Docker SDK failures into :class:`SandboxError` with ``retryable`` set by their kind."""
    try:
        yield
    except SandboxError:
        raise
    except docker.errors.ImageNotFound as e:
        raise SandboxError(
            f"the sandbox image is missing: {e.explanation or e}",
            where=where,
            next_step=f"build it: {BUILD_IMAGE_HINT}",
            retryable=False,
            code=SandboxErrorCode.IMAGE_MISSING,
        ) from e
    except docker.errors.APIError as e:
        raise SandboxError(
            f"the Docker engine refused: {e.explanation or e}",
            where=where,
            next_step="check the engine (`docker info`) and retry",
            retryable=e.is_server_error(),
            code=SandboxErrorCode.ENGINE_ERROR,
        ) from e
    except (docker.errors.DockerException, requests.exceptions.RequestException, ConnectionError) as e:
        raise SandboxError(
            f"the Docker engine is not reachable: {e}",
            where=where,
            next_step="start the Docker daemon (or set DOCKER_HOST) and retry",
            retryable=True,
            code=SandboxErrorCode.ENGINE_UNREACHABLE,
        ) from e


def default_work_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"orchestrator-sandbox-{os.geteuid()}"


def private_dir(path: Path) -> Path:
    """Create (0700) or accept ``path`` only if it is a real folder of ours: it feeds mounts of every job."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise SandboxError(
            f"sandbox work folder {path} is not a folder owned by this user",
            where="sandbox:setup",
            next_step="remove it or pass another work_dir",
            retryable=False,
        )
    return path
