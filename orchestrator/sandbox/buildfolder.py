"""A job's ``build/`` as the host sees it: read, written, listed and exported through the job's holder container.

Every read is capped at the job's disk limit on the host side (see ``buildfs.Budget``), whatever the in-container
clean-up saw; files that break the contract are removed from ``build/`` and reported once as ``disk_limit``
violations (see :meth:`BuildFolder.take_pruned`).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import docker
import docker.errors

from orchestrator.config import SandboxSettings
from orchestrator.errors import SandboxError, SandboxErrorCode, SandboxRefused
from orchestrator.logs import get_logger
from orchestrator.sandbox import buildfs
from orchestrator.sandbox.archive import open_archive
from orchestrator.sandbox.engine import docker_errors
from orchestrator.sandbox.limits import BUILD_DIR, safe_build_path, sandbox_environment
from orchestrator.sandbox.models import BuildFile

log = get_logger(__name__)

HOLDER_BUILD = "/build"
EXEC_EXIT_WAIT_S = 5.0
"""How long the engine may go on reporting a finished holder command as running."""


def available_bytes(df_output: str) -> int | None:
    """The available bytes in the output of ``df -P -B1 PATH`` (its last line's third field from the end,
    which a file system name with spaces cannot shift); None when the output does not have that shape."""
    lines = df_output.strip().splitlines()
    fields = lines[-1].split() if len(lines) >= 2 else []
    if len(fields) < 6 or not fields[-3].isdigit() or not fields[-2].endswith("%"):
        return None
    return int(fields[-3])


class BuildFolder:
    """The ``build/`` volume of one job, reached through its running holder container ``holder``."""

    def __init__(self, api: docker.APIClient, holder: str, *, name: str, disk_mb: int, settings: SandboxSettings):
        self._api = api
        self.holder = holder
        self.name = name
        self.disk_mb = disk_mb
        self.settings = settings
        self._dirty = False
        self._listing: list[BuildFile] | None = None  # build/ as last listed, until anything may have changed it
        self._pruned: list[str] = []
        self._reported: set[str] = set()

    @property
    def dirty(self) -> bool:
        """A script ran since build/ was last checked (see :meth:`prune`); the last listing no longer holds."""
        return self._dirty

    @dirty.setter
    def dirty(self, value: bool) -> None:
        self._dirty = value
        if value:
            self._listing = None

    def exec_holder(self, argv: list[str]) -> tuple[int, str]:
        """Run a runtime command in the holder: from ``/`` (never the skill root, which is the image's working
        folder), so nothing a skill ships (``json.py``, ``sitecustomize.py``, …) can be picked up by it."""
        uid = self.settings.uid
        with docker_errors(f"container:{self.name}-holder"):
            exec_id = self._api.exec_create(
                self.holder, argv, user=f"{uid}:{uid}", workdir="/", environment=sandbox_environment()
            )["Id"]
            output = self._api.exec_start(exec_id)
            code = self.exit_code(exec_id, argv[0])
        return code, output.decode("utf-8", errors="replace")

    def exit_code(self, exec_id: str, program: str) -> int:
        """The exit code of the holder command ``exec_id``, once the engine has it.

        The engine may still report the command running for a moment after its output ended; it is asked again
        until :data:`EXEC_EXIT_WAIT_S`. A command it reports no exit code for (it never ran to its end) is an engine
        failure, never a success: read as 0, an empty answer passed for a clean run."""
        deadline = time.monotonic() + EXEC_EXIT_WAIT_S
        while True:
            state = self._api.exec_inspect(exec_id)
            if state.get("ExitCode") is not None:
                return int(state["ExitCode"])
            if not state.get("Running") or time.monotonic() >= deadline:
                raise SandboxError(
                    f"the engine reports no exit code for {program} in the job's holder"
                    f" ({'still running' if state.get('Running') else 'it did not run to its end'})",
                    where=f"container:{self.name}-holder",
                    next_step="retry; if it keeps happening, check the engine (`docker info`)",
                    retryable=True,
                    code=SandboxErrorCode.ENGINE_ERROR,
                )
            time.sleep(0.02)

    def check_script(self, script: str, target: str) -> None:
        """Refuse ``target`` (``build/…``) unless it is a regular file in ``build/``."""
        rel = target.split("/", 1)[1]
        where = f"tool:run_script:{script}"
        with docker_errors(where):
            path_stat: dict[str, Any] | None = None
            try:
                chunks, path_stat = self._api.get_archive(self.holder, f"{HOLDER_BUILD}/{rel}")
                for _chunk in chunks:  # drain the stream so the connection goes back to the pool
                    pass
            except docker.errors.NotFound:
                path_stat = None
        if path_stat is None or not buildfs.stat_is_regular(path_stat):
            what = "does not exist" if path_stat is None else "is not a regular file"
            raise SandboxRefused(
                f"script {script!r} {what} in build/",
                where=where,
                next_step="write the script with write_artifact first, then run it as build/NAME",
                retryable=False,
                violation="not_found" if path_stat is None else "not_a_file",
                script=script,
            )

    def take_pruned(self) -> list[str]:
        """Violations found since the last call (files removed from ``build/``), handed out once."""
        pruned, self._pruned = self._pruned, []
        return pruned

    def prune(self) -> None:
        """Remove what scripts left in ``build/`` that breaks the disk contract (sparse or oversized files, names
        that are not UTF-8) before anything is listed or copied out. Runs once after each call, when ``build/`` is
        next read: scripts are the only writers that can leave such files, and none runs any more by then."""
        if not self._dirty:
            return
        limit = self.disk_mb * 1024 * 1024
        code, out = self.exec_holder(["python3", "-I", "-c", buildfs.PRUNE_SCRIPT, HOLDER_BUILD, str(limit)])
        try:
            removed = json.loads(out)["removed"] if code == 0 else []
        except (ValueError, KeyError):
            removed = []
        if code != 0:
            raise SandboxError(f"cannot check build/: {out.strip()[-300:]}", where=f"sandbox:{self.name}",
                               retryable=True, code=SandboxErrorCode.PRUNE_FAILED)
        self._dirty = False
        self._listing = None
        for item in removed:
            violation = f"disk_limit: removed build/{item['path']} ({item['why']})"
            log.warning("sandbox.build_pruned", job=self.name, violation=violation)
            self._pruned.append(violation)

    def free_bytes(self) -> int:
        """Bytes still free in ``build/`` (the tmpfs as the kernel counts it)."""
        code, out = self.exec_holder(["df", "-P", "-B1", HOLDER_BUILD])
        free = available_bytes(out) if code == 0 else None
        if free is None:
            raise SandboxError(
                f"cannot measure build/: df exited {code} and printed {out.strip()[-300:]!r}",
                where=f"sandbox:{self.name}",
                retryable=True,
                code=SandboxErrorCode.ENGINE_ERROR,
            )
        return free

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        """Write ``data`` to ``build/rel_path``; a write that does not fit raises ``disk_full`` and leaves nothing."""
        rel = safe_build_path(rel_path)
        self._listing = None
        free = self.free_bytes()
        needed = -(-len(data) // 4096) * 4096 + 4096 * (rel.count("/") + 1)
        if needed > free:
            raise self._disk_full(rel, len(data), free)
        try:
            with docker_errors(f"sandbox:write_file:{rel}"):
                self._api.put_archive(self.holder, HOLDER_BUILD, buildfs.file_archive(rel, data, self.settings.uid))
        except SandboxError as e:
            self.exec_holder(["rm", "-f", "--", f"{HOLDER_BUILD}/{rel}"])
            if "no space" in str(e).lower():
                raise self._disk_full(rel, len(data), free) from e
            raise
        return BuildFile(path=rel, size=len(data), sha256=hashlib.sha256(data).hexdigest())

    def _disk_full(self, rel: str, size: int, free: int) -> SandboxError:
        return SandboxError(
            f"build/ is full: {rel} needs {size} bytes, {free} bytes free of {self.disk_mb} MiB",
            where=f"sandbox:write_file:{rel}",
            next_step="write less, or remove files from build/ first",
            retryable=False,
            code=SandboxErrorCode.DISK_FULL,
        )

    def read_file(self, rel_path: str, *, max_bytes: int) -> bytes:
        """The content of the regular file ``build/rel_path`` (symlinks and folders refused)."""
        self.prune()
        rel = safe_build_path(rel_path)
        where = f"sandbox:read_file:{rel}"
        max_bytes = min(max_bytes, self.disk_mb * 1024 * 1024)
        with docker_errors(where), self._archive(f"{HOLDER_BUILD}/{rel}", where) as (chunks, path_stat):
            if not buildfs.stat_is_regular(path_stat):
                raise SandboxError(
                    f"build/{rel} is not a regular file", where=where, retryable=False,
                    code=SandboxErrorCode.NOT_A_FILE,
                )
            if int(path_stat.get("size", 0)) > max_bytes:
                raise SandboxError(
                    f"build/{rel} is {path_stat['size']} bytes, more than {max_bytes}",
                    where=where,
                    retryable=False,
                    code=SandboxErrorCode.TOO_LARGE,
                )
            try:
                return buildfs.read_single_file(chunks, max_bytes)
            except buildfs.OverLimit as e:
                raise SandboxError(e.message, where=where, retryable=False, code=SandboxErrorCode.TOO_LARGE) from e

    def list_files(self) -> list[BuildFile]:
        """Every regular file in ``build/`` with its size and sha256 (read again only after build/ may have
        changed: a script or command ran, a file was written, or a file was removed)."""
        self.prune()
        if self._listing is None:
            self._listing = self._read_build("list", lambda chunks, budget: buildfs.list_archive(chunks, budget))
        return list(self._listing)

    def export(self, dest: Path) -> list[BuildFile]:
        """Copy ``build/`` into the host folder ``dest`` (regular files only, nothing followed through symlinks)."""
        self.prune()
        self._listing = None
        return self._read_build("export", lambda chunks, budget: buildfs.extract_archive(chunks, Path(dest), budget))

    def _read_build(
        self, what: str, read: Callable[[Iterator[bytes], buildfs.Budget], list[BuildFile]]
    ) -> list[BuildFile]:
        """``read`` the archive of ``build/`` with the job's disk limit as the host's budget.

        The in-container check normally leaves nothing over the limit; if the stream still carries more (a folder
        it could not walk, a file grown since), the file that crossed the limit is removed from ``build/`` with a
        ``disk_limit`` violation and the archive is read again, a few times at most.
        """
        where = f"sandbox:{self.name}:{what}"
        for _attempt in range(4):
            budget = buildfs.Budget(limit=self.disk_mb * 1024 * 1024)
            try:
                with docker_errors(where), self._archive(HOLDER_BUILD, where) as (chunks, _):
                    files = read(chunks, budget)
            except buildfs.OverLimit as e:
                self._over_limit(e, where)
                continue
            for violation in budget.violations:
                self._report(violation)
            return files
        raise SandboxError(
            f"build/ keeps holding more than {self.disk_mb} MiB",
            where=where,
            next_step="write less into build/",
            retryable=False,
            code=SandboxErrorCode.DISK_LIMIT,
        )

    def _archive(self, path: str, where: str) -> AbstractContextManager[tuple[Iterator[bytes], dict[str, Any]]]:
        shown = path.replace(HOLDER_BUILD, BUILD_DIR, 1)
        return open_archive(self._api, self.holder, path, shown=shown, where=where)

    def _over_limit(self, e: buildfs.OverLimit, where: str) -> None:
        self._listing = None
        log.warning("sandbox.host_read_over_limit", job=self.name, violation=e.message)
        if e.path is None:
            raise SandboxError(e.message, where=where, next_step="write less into build/", retryable=False,
                               code=SandboxErrorCode.DISK_LIMIT)
        code, out = self.exec_holder(["rm", "-rf", "--", f"{HOLDER_BUILD}/{e.path}"])
        if code != 0:
            raise SandboxError(f"{e.message}; removing it failed: {out.strip()[-200:]}", where=where,
                               retryable=False, code=SandboxErrorCode.DISK_LIMIT)
        self._report(f"disk_limit: removed build/{e.path} (the host read more than {self.disk_mb} MiB from build/)")

    def _report(self, violation: str) -> None:
        if violation not in self._reported:
            self._reported.add(violation)
            self._pruned.append(violation)
