"""Where an Act's ``build/`` lives.

In production ``build/`` is the sandbox job's size-limited tmpfs volume, so the disk limit is enforced by the kernel
for the model's own writes and for scripts alike. ``LocalBuildArea`` keeps it in a host folder (used when a goal
runs without scripts in tests); both satisfy :class:`BuildArea`.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Sequence
from pathlib import Path, PurePosixPath
from typing import Protocol

from orchestrator.errors import PathEscapeError, SandboxError, SandboxErrorCode
from orchestrator.sandbox.backend import SandboxBackend, SandboxJobArea, ScriptArgs
from orchestrator.sandbox.egress import EgressPlan
from orchestrator.sandbox.limits import BUILD_DIR, SKILL_MOUNT
from orchestrator.sandbox.models import BuildFile, ScriptResult


class BuildArea(Protocol):
    def write_file(self, rel_path: str, data: bytes) -> BuildFile: ...
    def read_file(self, rel_path: str, *, max_bytes: int = ...) -> bytes: ...
    def list_files(self) -> list[BuildFile]: ...
    def export(self, dest: Path) -> list[BuildFile]: ...
    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = (), timeout_s: float = 20
    ) -> ScriptResult: ...
    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult: ...
    def take_pruned(self) -> list[str]: ...
    def close(self) -> None: ...


BUILD_MOUNTS = (f"{SKILL_MOUNT}/{BUILD_DIR}/", f"/{BUILD_DIR}/")


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


class LocalBuildArea:
    """``build/`` in a host folder, with the disk limit checked in Python (no scripts can run here)."""

    def __init__(self, root: Path, *, disk_mb: int) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.limit_bytes = disk_mb * 1024 * 1024

    def _path(self, rel_path: str) -> Path:
        return self.root / clean_build_path(rel_path)

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        target = self._path(rel_path)
        used = sum(f.size for f in self.list_files() if f.path != clean_build_path(rel_path))
        if used + len(data) > self.limit_bytes:
            raise SandboxError(
                f"build/ is full: writing {len(data)} bytes would exceed {self.limit_bytes // 1048576} MB",
                code=SandboxErrorCode.DISK_FULL,
                retryable=False,
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return BuildFile(path=clean_build_path(rel_path), size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        target = self._path(rel_path)
        if not target.is_file():
            raise FileNotFoundError(rel_path)
        with target.open("rb") as fh:
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

    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = (), timeout_s: float = 20
    ) -> ScriptResult:
        raise SandboxError(
            "scripts cannot run without the Docker sandbox",
            code=SandboxErrorCode.NO_SANDBOX,
            next_step="run with a Docker engine available (bash ops/setup.sh)",
        )

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        raise SandboxError(
            "commands cannot run without the Docker sandbox",
            code=SandboxErrorCode.NO_SANDBOX,
            next_step="run with a Docker engine available (bash ops/setup.sh)",
        )

    def take_pruned(self) -> list[str]:
        return []

    def close(self) -> None:
        return None


class SandboxBuildArea:
    """``build/`` inside a sandbox job, opened on first use so a skill that never writes costs no container."""

    def __init__(
        self,
        backend: SandboxBackend,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int,
        inputs_dir: Path | None,
        operations: tuple[str, ...] = (),
        goal: str = "",
        egress: EgressPlan | None = None,
    ) -> None:
        self._backend = backend
        self._operations = operations
        self._goal = goal
        self._egress = egress
        self._job_id = job_id
        self._skill_root = skill_root
        self._disk_mb = disk_mb
        self._inputs_dir = inputs_dir
        self._job: SandboxJobArea | None = None

    @property
    def job(self) -> SandboxJobArea:
        if self._job is None:
            self._job = self._backend.open_job(
                self._job_id,
                self._skill_root,
                disk_mb=self._disk_mb,
                inputs_dir=self._inputs_dir,
                operations=self._operations,
                goal=self._goal,
                egress=self._egress,
            )
        return self._job

    @property
    def opened(self) -> bool:
        return self._job is not None

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        return self.job.write_file(clean_build_path(rel_path), data)

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        rel = clean_build_path(rel_path)
        # Only regular files that list_files reports: a symlinked folder planted by a script (build/root -> /)
        # must not lead a read into the holder's own files or the skill's scripts.
        if rel not in {f.path for f in self.list_files()}:
            raise SandboxError(
                f"build/{rel} does not exist (or is not a regular file)", code=SandboxErrorCode.NOT_FOUND
            )
        return self.job.read_file(rel, max_bytes=max_bytes)

    def list_files(self) -> list[BuildFile]:
        return self._job.list_files() if self._job is not None else []

    def export(self, dest: Path) -> list[BuildFile]:
        return self._job.export(dest) if self._job is not None else []

    def run_script(
        self, script: str, args: ScriptArgs = None, *, argv: Sequence[str] = (), timeout_s: float = 20
    ) -> ScriptResult:
        return self.job.run_script(script, args, argv=argv, timeout_s=timeout_s)

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        return self.job.run_command(argv, timeout_s=timeout_s)

    def take_pruned(self) -> list[str]:
        return self._job.take_pruned() if self._job is not None else []

    def close(self) -> None:
        if self._job is not None:
            self._job.close()
            self._job = None
