"""One sandbox job on the Docker SDK: its volumes and holder, one fresh container per call, build/ file access.

See ``docker.py`` for the runner that opens jobs and for the design.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import select
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import docker
import docker.errors
import docker.utils
import requests
from docker.types import Mount

from orchestrator.config import SandboxSettings
from orchestrator.errors import SandboxError, SandboxErrorCode, SandboxRefused
from orchestrator.logs import get_logger
from orchestrator.sandbox import buildfs
from orchestrator.sandbox.archive import open_archive
from orchestrator.sandbox.commands import resolve_command
from orchestrator.sandbox.engine import docker_errors, private_dir
from orchestrator.sandbox.limits import (
    BUILD_DIR,
    INPUTS_MOUNT,
    LAUNCHER,
    SKILL_MOUNT,
    build_volume_options,
    check_timeout,
    holder_host_config,
    overlay_volume_options,
    resolve_script,
    safe_build_path,
    sandbox_environment,
    script_host_config,
)
from orchestrator.sandbox.models import BuildFile, ScriptResult
from orchestrator.sandbox.profiles import call_timeout
from orchestrator.sandbox.reaper import labels
from orchestrator.sandbox.results import LaunchedCommand, script_result
from orchestrator.sandbox.streams import OutputCollector, pump

if TYPE_CHECKING:
    from orchestrator.sandbox.docker import SandboxRunner

log = get_logger(__name__)

HOLDER_BUILD = "/build"


@dataclass
class _Prepared:
    id: str
    name: str
    sock: Any  # the attach socket (socket.SocketIO over the engine's connection)
    started: bool
    raw: socket.socket = field(init=False)

    def __post_init__(self) -> None:
        self.raw = self.sock._sock

    def dead(self) -> bool:
        """True if the engine already closed the stream (the container exited before its call)."""
        if not self.started:
            return False
        readable, _, _ = select.select([self.raw], [], [], 0)
        if not readable:
            return False
        try:
            return self.raw.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def close(self) -> None:
        # shutdown, not just close: the HTTP response still holds the descriptor, and the engine must see the
        # connection end (a kill waits on its copy into this socket while we no longer read).
        with suppress(OSError):
            self.raw.shutdown(socket.SHUT_RDWR)
        with suppress(OSError):
            self.raw.close()
        with suppress(OSError):
            self.sock.close()


def _slug(job_id: str) -> str:
    return (re.sub(r"[^A-Za-z0-9_.-]+", "-", job_id).strip("-.") or "job")[:40]


class SandboxJob:
    """One job's sandbox: ``build/`` that persists across calls, and a fresh container per ``run_script``."""

    def __init__(
        self,
        runner: SandboxRunner,
        job_id: str,
        skill_root: Path,
        *,
        disk_mb: int,
        inputs_dir: Path | None,
        settings: SandboxSettings | None = None,
    ) -> None:
        self.runner = runner
        self.settings = settings or runner.settings  # the runner's, raised by the skill's declared operations
        self.job_id = job_id
        self.skill_root = skill_root
        self.disk_mb = disk_mb
        self.inputs_dir = Path(inputs_dir).resolve() if inputs_dir is not None else None
        self.name = f"{self.settings.label_prefix}-{_slug(job_id)}-{secrets.token_hex(4)}"
        self.job_dir = runner.work_dir / "jobs" / self.name
        self.skill_view: Literal["overlay", "copy"] = "overlay"
        self.setup_ms = 0.0
        self.holder: str | None = None
        self._api = runner.api
        self._containers: set[str] = set()
        self._volumes: list[str] = []
        self._removals: list[Future[None]] = []
        self._pending: Future[_Prepared] | None = None
        self._script_host_config: dict[str, Any] = {}
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._call_lock = threading.Lock()
        self._closed = False
        self._build_dirty = False  # a script ran since build/ was last checked (see _prune_build)
        self._pruned: list[str] = []
        self._reported: set[str] = set()

    def __enter__(self) -> SandboxJob:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _labels(self, role: str, call: int | None = None) -> dict[str, str]:
        return labels(
            self.settings.label_prefix,
            owner=self.runner.owner,
            job=self.job_id,
            role=role,
            call=call,
            jobdir=str(self.job_dir),
        )

    # -- setup ------------------------------------------------------------------------------------------------

    def _setup(self) -> None:
        started = time.perf_counter()
        with docker_errors(f"sandbox:setup:{self.name}"):
            build = self._create_volume(f"{self.name}-build", build_volume_options(self.disk_mb, self.settings.uid))
            skill_mount = self._skill_mount()
            build_mount = Mount(HOLDER_BUILD, build, type="volume", no_copy=True)
            try:
                self._start_holder([skill_mount, build_mount])
            except docker.errors.APIError as e:
                if self.runner.skill_view != "auto" or self.skill_view != "overlay":
                    raise
                log.info("sandbox.overlay_unavailable", job=self.name, error=str(e))
                self._discard_holder()
                skill_mount = self._copy_skill()
                self._start_holder([skill_mount, build_mount])
            mounts = [skill_mount, Mount(f"{SKILL_MOUNT}/{BUILD_DIR}", build, type="volume", no_copy=True)]
            if self.inputs_dir is not None:
                mounts.append(Mount(INPUTS_MOUNT, str(self.inputs_dir), type="bind", read_only=True))
            self._script_host_config = self._api.create_host_config(**script_host_config(self.settings, mounts))
        self.setup_ms = (time.perf_counter() - started) * 1000
        log.info("sandbox.job_open", job=self.name, skill_view=self.skill_view, setup_ms=round(self.setup_ms, 1))
        if self.runner.prewarm != "off":
            self._pending = self.runner.executor.submit(self._prepare)

    def _create_volume(self, name: str, options: dict[str, str]) -> str:
        self._api.create_volume(name=name, driver="local", driver_opts=options, labels=self._labels("volume"))
        self._volumes.append(name)
        return name

    def _skill_mount(self) -> Mount:
        options = None
        if self.runner.skill_view in ("auto", "overlay"):
            stub = self.runner.work_dir / "overlay-stub"
            (stub / BUILD_DIR).mkdir(parents=True, exist_ok=True)
            stub.chmod(0o755)  # the merged root takes the top layer's mode: the sandbox user must enter it
            options = overlay_volume_options(stub, self.skill_root)
        if options is None:
            if self.runner.skill_view == "overlay":
                raise SandboxError(
                    f"skill root {self.skill_root} cannot be an overlay lower layer (',', ':' or '=' in its path)",
                    where="sandbox:setup",
                    retryable=False,
                )
            return self._copy_skill()
        self.skill_view = "overlay"
        volume = self._create_volume(f"{self.name}-skill", options)
        return Mount(SKILL_MOUNT, volume, type="volume", read_only=True, no_copy=True)

    def _copy_skill(self) -> Mount:
        """Fallback view: a per-job copy of the skill (symlinks copied as links, never followed)."""
        self.skill_view = "copy"
        private_dir(self.job_dir.parent)
        target = self.job_dir / "skill"
        shutil.copytree(
            self.skill_root,
            target,
            symlinks=True,
            ignore=lambda folder, names: [BUILD_DIR] if Path(folder) == self.skill_root and BUILD_DIR in names else [],
        )
        (target / BUILD_DIR).mkdir(exist_ok=True)
        for folder, _dirs, files in os.walk(target):
            os.chmod(folder, 0o755)  # the sandbox user reads the copy whatever the original modes were
            for name in files:
                path = Path(folder, name)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o444)
        return Mount(SKILL_MOUNT, str(target), type="bind", read_only=True)

    def _start_holder(self, mounts: list[Mount]) -> None:
        uid = self.settings.uid
        created = self._api.create_container(
            self.settings.image,
            ["sleep", "infinity"],
            name=f"{self.name}-holder",
            user=f"{uid}:{uid}",
            environment=sandbox_environment(),
            labels=self._labels("holder"),
            host_config=self._api.create_host_config(**holder_host_config(mounts)),
            network_disabled=True,
            use_config_proxy=False,
        )
        self.holder = created["Id"]
        self._containers.add(created["Id"])
        self._api.start(created["Id"])

    def _discard_holder(self) -> None:
        if self.holder:
            self._remove_container(self.holder)
            self.holder = None
        for name in [v for v in self._volumes if v.endswith("-skill")]:
            self._remove_volume(name)

    # -- calls ------------------------------------------------------------------------------------------------

    def _prepare(self) -> _Prepared:
        """Create the next call's container, attach to it, and (with prewarm "started") start it."""
        with self._seq_lock:
            self._seq += 1
            call = self._seq
        uid = self.settings.uid
        name = f"{self.name}-c{call}"
        with docker_errors(f"container:{name}"):
            created = self._api.create_container(
                self.settings.image,
                LAUNCHER,
                name=name,
                user=f"{uid}:{uid}",
                working_dir=SKILL_MOUNT,
                environment=sandbox_environment(),
                labels=self._labels("script", call),
                host_config=self._script_host_config,
                stdin_open=True,  # with detach=False this also sets StdinOnce: our half-close ends stdin
                use_config_proxy=False,  # never inject the client's proxy settings into the environment
                network_disabled=True,
                hostname="sandbox",
            )
            cid = created["Id"]
            self._containers.add(cid)
            sock = self._api.attach_socket(cid, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
            prestart = self.runner.prewarm == "started"
            if prestart:
                self._api.start(cid)
        return _Prepared(cid, name, sock, started=prestart)

    def _take_prepared(self) -> _Prepared:
        pending, self._pending = self._pending, None
        if pending is not None:
            try:
                prepared = pending.result(timeout=120)
                if not prepared.dead():
                    return prepared
                self._discard(prepared)
            except Exception as e:  # noqa: BLE001 - a failed pre-creation is retried once, synchronously
                log.warning("sandbox.prewarm_failed", job=self.name, error=str(e))
        return self._prepare()

    def wait_ready(self, timeout_s: float = 120) -> None:
        """Block until the next call's container is prepared (benchmarks use it to keep measurements apart)."""
        if self._pending is not None:
            with suppress(Exception):
                self._pending.result(timeout=timeout_s)

    def run_script(
        self,
        script: str,
        args: dict[str, Any] | list[Any] | None = None,
        *,
        argv: Sequence[str] = (),
        timeout_s: float = 20,
    ) -> ScriptResult:
        """Run ``script`` with ``args`` as its stdin JSON and ``argv`` as its command line, in a fresh container.

        ``script`` is relative to the skill root: a file of the skill, or code the model wrote under ``build/``
        (same container, same rules). ``timeout_s`` is capped at ``sandbox.timeout_cap_s``. Raises
        :class:`SandboxRefused` before any container starts when the policy refuses the script, and
        :class:`SandboxError` when the engine fails. A failing, slow, noisy or OOM-killed script is a result.
        """
        self._check_open()
        command = resolve_script(self.skill_root, script, self.settings.allowed_extensions, argv)
        if command.in_build:
            self._check_build_script(command.script, command.target)
        try:
            payload = json.dumps({} if args is None else args, ensure_ascii=False, allow_nan=False).encode()
        except ValueError as e:  # also UnicodeEncodeError (lone surrogates) and NaN/Infinity
            raise SandboxRefused(
                f"cannot run {script}: its args are not plain JSON ({e})",
                where=f"tool:run_script:{script}",
                next_step="pass args that are plain JSON",
                retryable=False,
                violation="bad_call",
                script=script,
            ) from e
        return self._call(command, payload, timeout_s)

    def run_command(self, argv: Sequence[str], *, timeout_s: float = 20) -> ScriptResult:
        """Run one allowed program (``argv[0]``, see ``sandbox/commands.py``) with the skill root as working folder.

        Same container, limits and result as :meth:`run_script`; stdin is empty and plain-text stdout is fine.
        Refused before any container starts when the program is not in ``sandbox.allowed_commands``.
        """
        self._check_open()
        command = resolve_command(argv, self.settings.allowed_commands)
        return self._call(command, b"", timeout_s)

    def _check_build_script(self, script: str, target: str) -> None:
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

    def _call(self, command: LaunchedCommand, payload: bytes, timeout_s: float) -> ScriptResult:
        try:
            check_timeout(timeout_s)
        except ValueError as e:
            raise SandboxRefused(
                str(e), where=f"tool:run_script:{command.label}", next_step="pass timeout_s as a number of seconds",
                retryable=False, violation="bad_call", script=command.label,
            ) from e
        timeout_s = call_timeout(self.settings, timeout_s, timeout_s)
        with self._call_lock:
            prepared = self._take_prepared()
            try:
                result = self._run(prepared, command, payload, timeout_s)
            finally:
                self._discard(prepared)
                if not self._closed and self.runner.prewarm != "off":
                    self._pending = self.runner.executor.submit(self._prepare)
            self._build_dirty = True
        log.info(
            "sandbox.call",
            job=self.name,
            container=result.container,
            cmd=result.command,
            exit_code=result.exit_code,
            ok=result.ok,
            stdout_bytes=result.stdout_bytes,
            stderr_bytes=result.stderr_bytes,
            duration_ms=result.duration_ms,
            timed_out=result.timed_out,
            oom_killed=result.oom_killed,
            reason=result.reason,
        )
        return result

    def _run(self, prepared: _Prepared, command: LaunchedCommand, payload: bytes, timeout_s: float) -> ScriptResult:
        collector = OutputCollector(self.settings.stdout_limit_bytes, self.settings.stderr_max_lines)
        where = f"container:{prepared.name}"
        with docker_errors(where):
            if not prepared.started:
                self._api.start(prepared.id)
            started = time.monotonic()
            deadline = started + timeout_s
            prepared.raw.settimeout(timeout_s)  # a script that never reads a large stdin must not block us
            try:
                prepared.raw.sendall(command.launcher_header(timeout_s) + payload)
                prepared.raw.shutdown(socket.SHUT_WR)  # EOF on the script's stdin
                fed = True
            except TimeoutError:
                fed = False
            except OSError as e:
                raise SandboxError(f"could not feed stdin to {prepared.name}: {e}", where=where, retryable=True) from e
            outcome = pump(prepared.raw, collector, deadline) if fed else "timeout"
            exit_code: int | None = None
            if outcome == "eof":  # output closed; a script that closed it early may still be running
                try:
                    exit_code = self._wait(prepared.id, max(deadline - time.monotonic(), 0.2))
                except requests.exceptions.Timeout:
                    outcome = "timeout"
            duration_ms = int((time.monotonic() - started) * 1000)
            if outcome != "eof":
                prepared.close()  # first: the engine's kill waits for its copy into this socket to end
                with suppress(docker.errors.APIError):
                    self._api.kill(prepared.id)
                exit_code = self._wait(prepared.id, 60)
            oom = False
            if outcome == "eof" and exit_code not in (0, None):
                state = self._api.inspect_container(prepared.id)["State"]
                oom = bool(state.get("OOMKilled"))
        return script_result(
            self.settings,
            self.disk_mb,
            command,
            prepared.name,
            collector,
            outcome,
            exit_code,
            oom,
            duration_ms,
            timeout_s,
        )

    def _wait(self, cid: str, timeout_s: float) -> int | None:
        status = self._api.wait(cid, timeout=timeout_s).get("StatusCode")
        return int(status) if status is not None else None

    def _discard(self, prepared: _Prepared) -> None:
        prepared.close()
        try:
            self._removals.append(self.runner.executor.submit(self._remove_container, prepared.id))
        except RuntimeError:  # the runner's executor is shut down: remove in this thread
            self._remove_container(prepared.id)

    def _remove_container(self, cid: str) -> None:
        try:
            self._api.remove_container(cid, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            if e.status_code != 409:  # 409: removal already in progress
                log.warning("sandbox.remove_failed", container=cid[:12], error=str(e))
                return
        self._containers.discard(cid)

    def _remove_volume(self, name: str) -> None:
        for attempt in range(20):
            try:
                self._api.remove_volume(name)
                break
            except docker.errors.NotFound:
                break
            except docker.errors.APIError as e:
                if e.status_code != 409 or attempt == 19:
                    log.warning("sandbox.volume_remove_failed", volume=name, error=str(e))
                    return
                time.sleep(0.05)
        if name in self._volumes:
            self._volumes.remove(name)

    # -- build/ -----------------------------------------------------------------------------------------------

    def _exec_holder(self, argv: list[str]) -> tuple[int, str]:
        """Run a runtime command in the holder: from ``/`` (never the skill root, which is the image's working
        folder), so nothing a skill ships (``json.py``, ``sitecustomize.py``, …) can be picked up by it."""
        uid = self.settings.uid
        with docker_errors(f"container:{self.name}-holder"):
            exec_id = self._api.exec_create(
                self.holder, argv, user=f"{uid}:{uid}", workdir="/", environment=sandbox_environment()
            )["Id"]
            output = self._api.exec_start(exec_id)
            code = self._api.exec_inspect(exec_id).get("ExitCode")
        return int(code or 0), output.decode("utf-8", errors="replace")

    def take_pruned(self) -> list[str]:
        """Violations found since the last call (files removed from ``build/``), handed out once."""
        pruned, self._pruned = self._pruned, []
        return pruned

    def _prune_build(self) -> None:
        """Remove what scripts left in ``build/`` that breaks the disk contract (sparse or oversized files, names
        that are not UTF-8) before anything is listed or copied out. Runs once after each call, when ``build/`` is
        next read: scripts are the only writers that can leave such files, and none runs any more by then."""
        if not self._build_dirty:
            return
        limit = self.disk_mb * 1024 * 1024
        code, out = self._exec_holder(["python3", "-I", "-c", buildfs.PRUNE_SCRIPT, HOLDER_BUILD, str(limit)])
        try:
            removed = json.loads(out)["removed"] if code == 0 else []
        except (ValueError, KeyError):
            removed = []
        if code != 0:
            raise SandboxError(f"cannot check build/: {out.strip()[-300:]}", where=f"sandbox:{self.name}",
                               retryable=True, code=SandboxErrorCode.PRUNE_FAILED)
        self._build_dirty = False
        for item in removed:
            violation = f"disk_limit: removed build/{item['path']} ({item['why']})"
            log.warning("sandbox.build_pruned", job=self.name, violation=violation)
            self._pruned.append(violation)

    def free_bytes(self) -> int:
        """Bytes still free in ``build/`` (the tmpfs as the kernel counts it)."""
        code, out = self._exec_holder(["df", "-P", "-B1", HOLDER_BUILD])
        if code != 0:
            raise SandboxError(f"cannot measure build/: {out.strip()}", where=f"sandbox:{self.name}", retryable=True)
        return int(out.strip().splitlines()[-1].split()[3])

    def write_file(self, rel_path: str, data: bytes) -> BuildFile:
        """Write ``data`` to ``build/rel_path``; a write that does not fit raises ``disk_full`` and leaves nothing."""
        self._check_open()
        rel = safe_build_path(rel_path)
        free = self.free_bytes()
        needed = -(-len(data) // 4096) * 4096 + 4096 * (rel.count("/") + 1)
        if needed > free:
            raise self._disk_full(rel, len(data), free)
        try:
            with docker_errors(f"sandbox:write_file:{rel}"):
                self._api.put_archive(self.holder, HOLDER_BUILD, buildfs.file_archive(rel, data, self.settings.uid))
        except SandboxError as e:
            self._exec_holder(["rm", "-f", "--", f"{HOLDER_BUILD}/{rel}"])
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

    def read_file(self, rel_path: str, *, max_bytes: int = 10 * 1024 * 1024) -> bytes:
        """The content of the regular file ``build/rel_path`` (symlinks and folders refused)."""
        self._check_open()
        self._prune_build()
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
        """Every regular file in ``build/`` with its size and sha256."""
        self._check_open()
        self._prune_build()
        return self._read_build("list", lambda chunks, budget: buildfs.list_archive(chunks, budget))

    def export(self, dest: Path) -> list[BuildFile]:
        """Copy ``build/`` into the host folder ``dest`` (regular files only, nothing followed through symlinks)."""
        self._check_open()
        self._prune_build()
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
        assert self.holder is not None
        shown = path.replace(HOLDER_BUILD, BUILD_DIR, 1)
        return open_archive(self._api, self.holder, path, shown=shown, where=where)

    def _over_limit(self, e: buildfs.OverLimit, where: str) -> None:
        log.warning("sandbox.host_read_over_limit", job=self.name, violation=e.message)
        if e.path is None:
            raise SandboxError(e.message, where=where, next_step="write less into build/", retryable=False,
                               code=SandboxErrorCode.DISK_LIMIT)
        code, out = self._exec_holder(["rm", "-rf", "--", f"{HOLDER_BUILD}/{e.path}"])
        if code != 0:
            raise SandboxError(f"{e.message}; removing it failed: {out.strip()[-200:]}", where=where,
                               retryable=False, code=SandboxErrorCode.DISK_LIMIT)
        self._report(f"disk_limit: removed build/{e.path} (the host read more than {self.disk_mb} MiB from build/)")

    def _report(self, violation: str) -> None:
        if violation not in self._reported:
            self._reported.add(violation)
            self._pruned.append(violation)

    def _check_open(self) -> None:
        if self._closed or self.holder is None:
            raise SandboxError("the sandbox job is closed", where=f"sandbox:{self.name}", retryable=False)

    # -- teardown ---------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove every container and volume of the job and its folder; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        pending, self._pending = self._pending, None
        if pending is not None:
            with suppress(Exception):
                self._discard(pending.result(timeout=120))
        for removal in list(self._removals):
            with suppress(Exception):
                removal.result(timeout=120)
        for cid in list(self._containers):
            self._remove_container(cid)
        for name in list(self._volumes):
            self._remove_volume(name)
        if self.job_dir.exists():
            shutil.rmtree(self.job_dir, ignore_errors=True)
        if self._containers or self._volumes:
            log.warning("sandbox.leftovers", job=self.name, containers=len(self._containers), volumes=self._volumes)
