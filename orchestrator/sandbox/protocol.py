"""The sandbox seam: the one protocol the Act engine, its tools and the workflow see of a sandbox.

:class:`SandboxBackend` opens jobs (:class:`SandboxJobArea`: one job's ``build/`` and the calls that run against it)
and reports the tools of its image. The Docker runner (``orchestrator.sandbox.docker.SandboxRunner``) implements it
against the real engine; the in-memory fake (``orchestrator.testing.memory_sandbox.InMemorySandbox``) implements it for
unit tests of the loop. The Act never opens a job itself: it holds a :class:`~orchestrator.sandbox.lazy.LazyJob`,
the one layer that opens the backend's job when a script first runs. ``tests/sandbox/test_job_contract.py`` holds
both backends to the same behaviour.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from orchestrator.errors import PathEscapeError
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.limits import BUILD_DIR, SKILL_MOUNT
from orchestrator.sandbox.models import BuildFile, ScriptResult

ScriptArgs = dict[str, Any] | list[Any] | None
"""The JSON a script receives on stdin."""


class SandboxJobArea(Protocol):
    """One job's ``build/`` (the only writable place) and the scripts that run against it."""

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        """Write ``data`` to ``build/rel_path``; ``SandboxError`` (``disk_full``) when it does not fit."""
        ...

    def read_file(self, rel_path: str, *, max_bytes: int = ...) -> bytes:
        """The regular file ``build/rel_path`` (at most ``max_bytes``); ``SandboxError`` (``not_found``) if none."""
        ...

    def list_files(self) -> list[BuildFile]:
        """Every regular file in ``build/`` with its size and sha256."""
        ...

    def export(self, dest: Path) -> list[BuildFile]:
        """Copy ``build/`` into the host folder ``dest`` (regular files only)."""
        ...

    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = ..., timeout_s: float = ...
    ) -> ScriptResult:
        """Run ``script`` (relative to the skill root: a skill file or ``build/NAME``) with ``args`` on stdin and
        ``argv`` as its command line. A failing, slow or OOM-killed script is a result; ``SandboxRefused`` before
        anything runs, ``SandboxError`` when the sandbox itself fails."""
        ...

    def run_command(self, argv: Sequence[str], *, timeout_s: float = ...) -> ScriptResult:
        """Run one allowed program (``argv[0]``) like a script; refused before any container when not allowed."""
        ...

    def take_pruned(self) -> list[str]:
        """Files removed from ``build/`` since the last call because they broke its contract."""
        ...

    def close(self) -> None:
        """Remove everything the job made (containers, volumes, staged files); safe to call twice."""
        ...


class SandboxBackend(Protocol):
    """Opens sandbox jobs and knows its image's tools."""

    def open_job(
        self,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int = ...,
        inputs_dir: Path | None = None,
        operations: Sequence[str] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> SandboxJobArea:
        """A job whose scripts see ``skill_root`` read-only and ``inputs_dir`` as ``/inputs``; close it after use.

        ``egress`` (a granted declaration) gives each call HTTPS to the granted hosts through the job's proxy;
        without it a call has no network at all.

        ``goal`` is the id of the goal (the worker's job) the sandbox job works for: its containers carry it as a
        label, and a goal's clean-up removes exactly the containers whose label equals its id."""
        ...

    def image_tools(self) -> dict[str, str]:
        """The tools of the sandbox image and their versions (``{"python3": "3.11.2", ...}``)."""
        ...

    def image_id(self) -> str:
        """The id of the image scripts run in (stored results are reused only for the same one)."""
        ...


BUILD_MOUNTS = (f"{SKILL_MOUNT}/{BUILD_DIR}/", f"/{BUILD_DIR}/")
"""``build/`` as scripts see it (and as models guess it): the same folder under another name."""


def clean_build_path(rel_path: str) -> str:
    """``rel_path`` normalised to a relative POSIX path inside ``build/`` (a leading ``build/``, ``/skill/build/`` or
    ``/build/`` is accepted).

    Raises ``PathEscapeError`` for a path that would leave ``build/`` and ``ValueError`` for one that names no file.
    """
    text = rel_path.strip().replace("\\", "/")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in text):
        raise ValueError(f"a file path cannot contain control characters: {rel_path!r}")
    for mount in BUILD_MOUNTS:  # build/ as scripts see it (or as models guess it): the same folder, not an escape
        if text.startswith(mount):
            text = text.removeprefix(mount)
            break
    path = PurePosixPath(text)
    if path.is_absolute() or ".." in path.parts:
        raise PathEscapeError(f"path must stay inside build/: {rel_path!r}", path=rel_path)
    parts = [p for p in path.parts if p != "."]
    if parts and parts[0] == "build":
        parts = parts[1:]
    if not parts:
        raise ValueError(f"not a file path inside build/: {rel_path!r}")
    return "/".join(parts)
