"""The one lazy layer: a job's sandbox that starts no container until a script or program runs.

Many skills only write files (``brand.json``, a template expanded): for them a sandbox job (a tmpfs volume, a holder
container, a prewarmed script container) is pure cost. A :class:`LazyJob` keeps ``build/`` in a private host folder
(:class:`HostBuild`), with the same path rules and disk limit, until the first ``run_script`` or ``run_command``;
then it opens the backend's job, copies the staged files into its ``build/`` and hands everything over to it.
Nothing written by the model ever runs outside the sandbox: only the orchestrator's own writes are staged. Without a
backend (a goal run with no sandbox) ``build/`` stays on the host and every call is refused with ``no_sandbox``.

Every call is traced as a ``container`` span, a child of the tool's.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from orchestrator.errors import SandboxError, SandboxErrorCode, SandboxRefused
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.models import BuildFile, ScriptResult
from orchestrator.sandbox.protocol import SandboxBackend, SandboxJobArea, ScriptArgs, clean_build_path
from orchestrator.tracing import tracer

NO_SANDBOX_STEP = "run with a Docker engine available (bash ops/setup.sh)"


class HostBuild:
    """``build/`` in a host folder, with the disk limit checked in Python: where a lazy job stages its files."""

    def __init__(self, root: Path, *, disk_mb: int) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.limit_bytes = disk_mb * 1024 * 1024

    def write_file(self, rel: str, data: bytes) -> BuildFile:
        used = sum(f.size for f in self.list_files() if f.path != rel)
        if used + len(data) > self.limit_bytes:
            raise SandboxError(
                f"build/ is full: writing {len(data)} bytes would exceed {self.limit_bytes // 1048576} MB",
                code=SandboxErrorCode.DISK_FULL,
                retryable=False,
            )
        target = self.root / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        except OSError as e:  # e.g. a file where a folder of the path should be
            raise SandboxError(
                f"cannot write build/{rel}: {e.strerror or e}", code=SandboxErrorCode.UNSPECIFIED
            ) from e
        return BuildFile(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def read_file(self, rel: str, *, max_bytes: int) -> bytes:
        with (self.root / rel).open("rb") as fh:
            return fh.read(max_bytes)

    def list_files(self) -> list[BuildFile]:
        files = []
        for path in sorted(self.root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                files.append(
                    BuildFile(
                        path=path.relative_to(self.root).as_posix(),
                        size=len(data),
                        sha256=hashlib.sha256(data).hexdigest(),
                    )
                )
        return files

    def export(self, dest: Path) -> list[BuildFile]:
        files = self.list_files()
        for f in files:
            target = dest / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.root / f.path, target)
        return files


class LazyJob:
    """A :class:`SandboxJobArea` that opens ``backend``'s job on the first call (see the module docstring)."""

    def __init__(
        self,
        backend: SandboxBackend | None,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int,
        inputs_dir: Path | None = None,
        operations: Sequence[str] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> None:
        self._backend = backend
        self._job_id = job_id
        self._skill_root = skill_root
        self._disk_mb = disk_mb
        self._inputs_dir = inputs_dir
        self._operations = tuple(operations)
        self._goal = goal
        self._egress = egress
        self._job: SandboxJobArea | None = None
        self._closed = False
        self._tmp = tempfile.TemporaryDirectory(prefix="orch-build-")
        self._staged = HostBuild(Path(self._tmp.name) / "build", disk_mb=disk_mb)

    @property
    def started(self) -> bool:
        """Whether the backend's job is open (a script or program has run)."""
        return self._job is not None

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("the sandbox job is closed", code=SandboxErrorCode.JOB_CLOSED, retryable=False)

    def _started_job(self, what: str) -> SandboxJobArea:
        self._check_open()
        if self._job is not None:
            return self._job
        if self._backend is None:
            raise SandboxError(
                f"{what} cannot run without the Docker sandbox", code=SandboxErrorCode.NO_SANDBOX,
                next_step=NO_SANDBOX_STEP,
            )
        job = self._backend.open_job(
            self._job_id, self._skill_root, disk_mb=self._disk_mb, inputs_dir=self._inputs_dir,
            operations=self._operations, goal=self._goal, egress=self._egress,
        )
        try:
            for f in self._staged.list_files():
                job.write_file(f.path, self._staged.read_file(f.path, max_bytes=f.size + 1))
        except BaseException:
            job.close()
            raise
        self._job = job
        return job

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        self._check_open()
        rel = clean_build_path(rel_path)
        if self._job is not None:
            return self._job.write_file(rel, data)
        return self._staged.write_file(rel, data)

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        self._check_open()
        rel = clean_build_path(rel_path)
        # Only regular files that list_files reports: a symlinked folder planted by a script (build/root -> /)
        # must not lead a read into the holder's own files or the skill's scripts.
        if rel not in {f.path for f in self.list_files()}:
            raise SandboxError(
                f"build/{rel} does not exist (or is not a regular file)", code=SandboxErrorCode.NOT_FOUND
            )
        if self._job is not None:
            return self._job.read_file(rel, max_bytes=max_bytes)
        return self._staged.read_file(rel, max_bytes=max_bytes)

    def list_files(self) -> list[BuildFile]:
        return self._job.list_files() if self._job is not None else self._staged.list_files()

    def export(self, dest: Path) -> list[BuildFile]:
        return self._job.export(dest) if self._job is not None else self._staged.export(dest)

    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = (), timeout_s: float = 20
    ) -> ScriptResult:
        job = self._started_job("scripts")
        return self._contained(script, lambda: job.run_script(script, args, argv=argv, timeout_s=timeout_s))

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        job = self._started_job("commands")
        return self._contained(argv[0] if argv else "", lambda: job.run_command(argv, timeout_s=timeout_s))

    def _contained(self, what: str, run: Callable[[], ScriptResult]) -> ScriptResult:
        """One script or program container, as a ``container`` span (opening the job belongs to the tool's span)."""
        attrs: dict[str, Any] = {"orch.job_id": self._job_id, "orch.script": what}
        with tracer().start_as_current_span("container", attributes=attrs) as span:
            try:
                result = run()
            except SandboxRefused as e:  # refused before any container started
                span.set_attribute("orch.violation", e.violation or "refused")
                raise
            span.set_attributes(_container_attributes(result))
            return result

    def take_pruned(self) -> list[str]:
        return self._job.take_pruned() if self._job is not None else []

    def close(self) -> None:
        self._closed = True
        try:
            if self._job is not None:
                self._job.close()
                self._job = None
        finally:
            self._tmp.cleanup()


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
