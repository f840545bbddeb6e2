"""The sandbox seam: what the Act engine, its tools and the workflow see of a sandbox.

:class:`SandboxBackend` opens a job that gives a build area (:class:`SandboxJobArea`) and reports the tools of its
image. The Docker runner (``orchestrator.sandbox.docker.SandboxRunner``) implements it against the real engine; an
in-memory fake (``orchestrator.testing.sandbox.InMemorySandbox``) implements it for unit tests of the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.models import BuildFile, ScriptResult

ScriptArgs = dict[str, Any] | list[Any] | None
"""The JSON a script receives on stdin."""


class SandboxJobArea(Protocol):
    """One job's ``build/`` (the only writable place) and the scripts that run against it."""

    def write_file(self, rel_path: str, data: bytes) -> BuildFile: ...

    def read_file(self, rel_path: str, *, max_bytes: int = ...) -> bytes: ...

    def list_files(self) -> list[BuildFile]: ...

    def export(self, dest: Path) -> list[BuildFile]: ...

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

    def close(self) -> None: ...


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
