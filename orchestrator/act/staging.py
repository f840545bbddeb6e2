"""A sandbox whose jobs start no container until something has to run (the one sandbox path of `run` and workers).

Many skills only write files (``brand.json``, a template expanded): for them a sandbox job (a tmpfs volume, a holder
container, a prewarmed script container) is pure cost. A staged job keeps ``build/`` in a private host folder, with
the same path rules and disk limit, until the first script or program runs; then it opens the real sandbox job,
copies the staged files into its ``build/`` and hands everything over to it. Nothing written by the model ever runs
outside the sandbox: only the orchestrator's own writes are staged.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.act.workspace import LocalBuildArea
from orchestrator.errors import SandboxError, SandboxErrorCode, SandboxRefused
from orchestrator.sandbox.backend import SandboxBackend, SandboxJobArea, ScriptArgs
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.models import BuildFile, ScriptResult
from orchestrator.tracing import tracer


class StagedSandbox:
    """Wraps a sandbox backend (``open_job`` / ``image_tools``); its jobs are :class:`StagedJob`."""

    def __init__(self, backend: SandboxBackend) -> None:
        self._backend = backend

    def open_job(
        self,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int = 50,
        inputs_dir: Path | None = None,
        operations: Sequence[str] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> SandboxJobArea:
        return StagedJob(
            self._backend, job_id, skill_root, disk_mb=disk_mb, inputs_dir=inputs_dir, operations=operations,
            goal=goal, egress=egress,
        )

    def image_tools(self) -> dict[str, str]:
        return self._backend.image_tools()

    def image_id(self) -> str:
        return self._backend.image_id()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)


class StagedJob:
    """``build/`` on the host until a script runs, then the real sandbox job (see the module docstring)."""

    def __init__(
        self,
        backend: SandboxBackend,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int,
        inputs_dir: Path | None,
        operations: Sequence[str] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> None:
        self._backend = backend
        self._args = (job_id, skill_root)
        self._goal = goal
        self._egress = egress
        self._disk_mb = disk_mb
        self._inputs_dir = inputs_dir
        self._operations = tuple(operations)
        self._job: SandboxJobArea | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="orch-staged-")
        self._local = LocalBuildArea(Path(self._tmp.name) / "build", disk_mb=disk_mb)

    def _real(self) -> SandboxJobArea:
        if self._job is None:
            job = self._backend.open_job(
                *self._args, disk_mb=self._disk_mb, inputs_dir=self._inputs_dir, operations=self._operations,
                goal=self._goal, egress=self._egress,
            )
            try:
                for f in self._local.list_files():
                    job.write_file(f.path, self._local.read_file(f.path, max_bytes=f.size + 1))
            except BaseException:
                job.close()
                raise
            self._job = job
        return self._job

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        if self._job is not None:
            return self._job.write_file(rel_path, data)
        try:
            return self._local.write_file(rel_path, data)
        except OSError as e:
            raise SandboxError(
                f"cannot write build/{rel_path}: {e.strerror or e}", code=SandboxErrorCode.UNSPECIFIED
            ) from e

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        if self._job is not None:
            return self._job.read_file(rel_path, max_bytes=max_bytes)
        if rel_path not in {f.path for f in self._local.list_files()}:
            raise SandboxError(
                f"build/{rel_path} does not exist (or is not a regular file)", code=SandboxErrorCode.NOT_FOUND
            )
        return self._local.read_file(rel_path, max_bytes=max_bytes)

    def list_files(self) -> list[BuildFile]:
        if self._job is not None:
            return self._job.list_files()
        return self._local.list_files()

    def export(self, dest: Path) -> list[BuildFile]:
        if self._job is not None:
            return self._job.export(dest)
        return self._local.export(dest)

    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = (), timeout_s: float = 20
    ) -> ScriptResult:
        return self._contained(script, lambda job: job.run_script(script, args, argv=argv, timeout_s=timeout_s))

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        return self._contained(argv[0] if argv else "", lambda job: job.run_command(argv, timeout_s=timeout_s))

    def _contained(self, what: str, run: Callable[[SandboxJobArea], ScriptResult]) -> ScriptResult:
        """Every script or program container of a job, as a ``container`` span (a child of the tool's)."""
        job = self._real()  # opening the job (its holder, the copy of staged files) belongs to the tool's span
        attrs: dict[str, Any] = {"orch.job_id": self._args[0], "orch.script": what}
        with tracer().start_as_current_span("container", attributes=attrs) as span:
            try:
                result = run(job)
            except SandboxRefused as e:  # refused before any container started
                span.set_attribute("orch.violation", e.violation or "refused")
                raise
            span.set_attributes(_container_attributes(result))
            return result

    def take_pruned(self) -> list[str]:
        pruned: list[str] = self._job.take_pruned() if self._job is not None else []
        return pruned

    def close(self) -> None:
        try:
            if self._job is not None:
                self._job.close()
                self._job = None
        finally:
            self._tmp.cleanup()

    def __getattr__(self, name: str) -> Any:
        # Anything else the Docker job offers beyond the seam (e.g. thumbnails' helpers) needs the real job.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._real(), name)


def _container_attributes(result: ScriptResult) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "orch.container": result.container or "",
        "orch.exit_code": -1 if result.exit_code is None else result.exit_code,
        "orch.duration_ms": result.duration_ms,
        "orch.ok": result.ok,
    }
    if result.timed_out or result.oom_killed or result.limit:
        attrs["orch.limit"] = result.limit or ("timeout" if result.timed_out else "memory")
    if result.violations:
        attrs["orch.violation"] = ", ".join(result.violations)[:300]
    return attrs
